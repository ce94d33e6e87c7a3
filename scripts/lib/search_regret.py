# SPDX-License-Identifier: Apache-2.0
"""Search quality of a family's budgeted search (issue 39): for each shape, tunes matmul once
exhaustively (CUBERT_AUTOTUNE_LEVEL=full) and once at the default level, each into an empty
cache, and reports the budgeted choice's regret against the exhaustive best (both times taken
from the exhaustive run's measurements, so one run's noise does not count twice) and the share
of the valid configurations the budgeted search timed. Every run shares one kernel disk cache
(its tune cache is fresh), so a GPU family compiles each configuration once in all.

Usage: python3 search_regret.py CLI DEVICE DTYPE SHAPE... (shapes as 256x256x256). The budgeted
run's level is CUBERT_REGRET_LEVEL (default extensive: 12.5 % of the space, at most 256)."""
import json
import os
import statistics
import subprocess
import sys
import tempfile


def tune(cli, device, dtype, shape, level, kernels):
    with tempfile.TemporaryDirectory(prefix="cubert-regret-") as cache:
        # A fresh tune cache per run, one kernel disk cache for all: a GPU family's thousands of
        # configurations compile once (the first key), not once per key and level.
        os.symlink(kernels, os.path.join(cache, "kernels"))
        env = dict(os.environ, CUBERT_CACHE_DIR=cache)
        if level:
            env["CUBERT_AUTOTUNE_LEVEL"] = level
        out = subprocess.run([cli, "tune", "--device", device, "--json", "--explain", "--no-checks",
                              "matmul", "--dtype", dtype, "--shape", shape],
                             env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["keys"][0]


def main():
    cli, device, dtype, shapes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    regrets, shares = [], []
    # CUBERT_REGRET_KERNELS keeps the compiled configurations across calls (a run split over
    # several commands on the GPU machine compiles the space once).
    kernels = os.environ.get("CUBERT_REGRET_KERNELS") or tempfile.mkdtemp(
        prefix="cubert-regret-kernels-")
    os.makedirs(kernels, exist_ok=True)
    for shape in shapes:
        full = tune(cli, device, dtype, shape, "full", kernels)
        budgeted = tune(cli, device, dtype, shape,
                        os.environ.get("CUBERT_REGRET_LEVEL", "extensive"), kernels)
        truth = {c["name"]: c["min_ns"] for c in full["candidates"] if "min_ns" in c}
        best = min(truth.values())
        chosen = next(c["name"] for c in budgeted["candidates"] if c["index"] == budgeted["winner"])
        timed = sum(1 for c in budgeted["candidates"] if c["status"] != "skipped")
        valid = full["search"]["valid"]
        listed = sum(1 for c in full["candidates"] if "=" not in c["name"])
        share = timed / max(valid + listed, 1)
        regret = truth.get(chosen, float("inf")) / best - 1
        regrets.append(regret)
        shares.append(share)
        print(f"{shape}: chose {chosen} ({truth.get(chosen, 0) / 1e3:.1f} us), exhaustive best "
              f"{best / 1e3:.1f} us; regret {100 * regret:.2f} %; timed {timed} of "
              f"{valid + listed} ({100 * share:.1f} %)")
    print(f"median regret {100 * statistics.median(regrets):.2f} % over {len(regrets)} keys "
          f"(target <= 2 %), most timed {100 * max(shares):.1f} % of a space (target <= 10 %)")


if __name__ == "__main__":
    main()
