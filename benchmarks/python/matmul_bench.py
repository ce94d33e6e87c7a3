# SPDX-License-Identifier: Apache-2.0
"""`cubert.ops.matmul` called from Python against the C++ figure for the same shape, in one run
(issue 41: Python reaches >= 0.98x the C++ figure). The C++ figure is `cubert bench matmul`'s
median of 50 `client.profile` windows around the tuned choice; the Python figure is the median of
50 `Client.profile` windows around `cubert.ops.matmul(a, b)` called from Python (the tuner's
lookup and a new output each call included), after the same tuning (one persistent cache). The
throughput of a back-to-back loop is printed too. Usage:
  python matmul_bench.py CUBERT_CLI [device] [MxNxK] [dtype]   (default cuda:0 4096x4096x4096 f16)
"""
import json
import statistics
import subprocess
import sys
import time

import numpy as np

import cubert


def chosen_of(doc):
    """The first `chosen` entry of `cubert bench --json`'s document."""
    if isinstance(doc, dict):
        if "chosen" in doc:
            return doc["chosen"]
        doc = list(doc.values())
    if isinstance(doc, list):
        for v in doc:
            found = chosen_of(v)
            if found:
                return found
    return None


def main():
    cli = sys.argv[1]
    device = sys.argv[2] if len(sys.argv) > 2 else "cuda:0"
    shape = sys.argv[3] if len(sys.argv) > 3 else "4096x4096x4096"
    dtype = sys.argv[4] if len(sys.argv) > 4 else "f16"
    m, n, k = (int(v) for v in shape.split("x"))
    out = subprocess.run([cli, "bench", "matmul", "--shape", shape, "--dtype", dtype, "--device",
                          device, "--json", "--repeat", "50"], check=True, capture_output=True,
                         text=True).stdout
    cpp = chosen_of(json.loads(out[out.index("{"):]))
    cpp_ns = float(cpp["median_ns"])
    c = cubert.client(device)
    np_type = {"f32": np.float32, "f16": np.float16}[dtype]
    rng = np.random.default_rng(1)

    def operand(rows, cols):
        # The C++ bench's values: magnitudes in [1/16, 1) with a random sign (a tensor core's
        # power, and so its clock, depends on the data).
        mag = rng.uniform(1 / 16, 1, (rows, cols))
        return (mag * rng.choice([-1.0, 1.0], (rows, cols))).astype(np_type)

    a = c.create(operand(m, k))
    b = c.create(operand(k, n))
    cubert.ops.matmul(a, b)  # Tuned already by the CLI: read from the persistent cache.
    c.sync()
    py_ns = statistics.median(c.profile(lambda: cubert.ops.matmul(a, b), "matmul") * 1e9
                              for _ in range(50))
    reps = max(5, int(0.2e9 / cpp_ns))
    start = time.perf_counter()
    for _ in range(reps):
        cubert.ops.matmul(a, b)
    c.sync()
    loop_ns = (time.perf_counter() - start) / reps * 1e9
    flops = 2.0 * m * n * k
    print(f"matmul {shape} {dtype} on {device}: C++ ({cpp['name']}) {cpp_ns / 1e3:.1f} us "
          f"{flops / cpp_ns / 1e3:.1f} TFLOP/s; Python {py_ns / 1e3:.1f} us "
          f"{flops / py_ns / 1e3:.1f} TFLOP/s (a back-to-back loop: {loop_ns / 1e3:.1f} us)")
    print(f"python / C++ speed: {cpp_ns / py_ns:.3f} (target >= 0.98)")


if __name__ == "__main__":
    main()
