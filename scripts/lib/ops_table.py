# SPDX-License-Identifier: Apache-2.0
"""Joins `cubert bench --json` documents with the peers' figures (torch_ops_peers.py) into the
kernel library's GPU table: figure, target, cubert, peer, ratio, met.

Usage: python3 ops_table.py PEERS.json BENCH.json... (a bench document's argv says whether it ran
with the vendor candidate: --no-vendor means the library's own kernels alone)."""
import json
import math
import sys

TORCH_DTYPE = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


def peer(peers, figure, shape, dtype):
    for p in peers:
        if p.get("figure") == figure and p.get("shape") == shape and p.get("dtype") == dtype:
            return p
    return None


def is_sweep(doc):
    return sum(1 for k in doc.get("keys", []) if k.get("op") == "matmul") >= 10


def sweep_line(doc):
    """A sweep's summary: the geomean and the least of its ratios against the peer that
    `cubert bench` ran itself on the same inputs (cuBLAS on CUDA)."""
    own = "--no-vendor" in doc.get("argv", "")
    ratios = [(k["ratio"], k["shape"]) for k in doc["keys"] if k.get("ratio")]
    if not ratios:
        return "matmul sweep: no ratios (no peer ran)"
    geo = math.exp(sum(math.log(r) for r, _ in ratios) / len(ratios))
    worst = min(ratios)
    target = 0.80 if own else 1.0
    met = geo >= target if own else worst[0] >= 0.97  # 1.0 on every shape, within timing noise
    who = "own kernels" if own else "with cuBLAS"
    return (f"matmul {doc['keys'][0]['dtype']} sweep of {len(ratios)} shapes ({who}) vs cuBLAS: "
            f"geomean {geo:.3f}, least {worst[0]:.3f} at {worst[1]}, target {target:.2f}"
            f"{'' if own else ' on every shape'}  {'yes' if met else 'NO'}")


def rows(doc, peers):
    own = "--no-vendor" in doc.get("argv", "")
    device = doc.get("device", {})
    opencl = isinstance(device, dict) and device.get("backend") == "opencl"
    for key in doc.get("keys", []):
        chosen = key.get("chosen", {})
        ms = chosen.get("median_ns", 0) / 1e6
        if not ms:
            continue
        op, shape, dt = key["op"], key["shape"], TORCH_DTYPE.get(key["dtype"], key["dtype"])
        if op == "matmul" and opencl:
            yield (f"matmul {key['dtype']} {shape} (OpenCL)", "cuBLAS", 0.75, ms,
                   peer(peers, "cublas", shape, dt))
        elif op == "matmul":
            p = peer(peers, "cublas", shape, dt)
            target = (0.90 if dt == "float32" else 0.80) if own else 1.0
            label = f"matmul {key['dtype']} {shape} ({'own kernels' if own else 'with cuBLAS'})"
            yield label, "cuBLAS", target, ms, p
            t = peer(peers, "triton", shape, dt)
            if t is not None:
                which = "own kernels" if own else "tuned choice"
                yield f"matmul {key['dtype']} {shape} ({which})", "Triton", 1.0, ms, t
        elif op == "add":
            yield f"add {shape} {key['dtype']}", "torch.add", 0.95, ms, peer(peers, "torch.add", shape, dt)
        elif op == "sum" and key.get("layout") == "all":
            yield f"sum {shape} {key['dtype']}", "torch.sum", 0.95, ms, peer(peers, "torch.sum", shape, dt)
        elif op == "sum":
            yield (f"row sum {shape} {key['dtype']}", "torch.sum(dim=1)", 1.0, ms,
                   peer(peers, "torch.sum(dim=1)", shape, dt))


def tune_lines(doc, peers):
    """A `cubert tune --explain` document: its cold tuning time against Triton's cold autotune."""
    for key in doc.get("keys", []):
        search = key.get("search")
        if not search:
            continue
        dt = TORCH_DTYPE.get(key["dtype"], key["dtype"])
        t = peer(peers, "triton", key["shape"], dt)
        ran = sum(1 for s in search["steps"] if not s["from_cache"] and not s["final_round"])
        secs = key.get("decided_ms", search["wall_ms"]) / 1e3
        head = (f"cold tune {key['op']} {key['dtype']} {key['shape']}: {secs:.2f} s, {ran} of "
                f"{search['valid']} valid configurations ({search['strategy']}, stopped: "
                f"{search['stopped']})")
        if t is None or "autotune_s" not in t:
            yield head + "; no Triton peer"
            continue
        ratio = t["autotune_s"] / secs if secs > 0 else 0
        yield (f"{head}; Triton's {t['configs']}-configuration autotune {t['autotune_s']:.2f} s; "
               f"ratio {ratio:.3f}, target 1.00  {'yes' if ratio >= 1.0 else 'NO'}")


def main():
    peers = json.load(open(sys.argv[1])).get("peers", [])
    print(f"{'figure':<46} {'peer':<18} {'target':>6} {'cubert ms':>10} {'peer ms':>9} {'ratio':>6}  met")
    sweeps = []
    for path in sys.argv[2:]:
        if path == sys.argv[1]:  # The peers' file matches the ops-*.json glob of gpu-check.sh.
            continue
        doc = json.load(open(path))
        if doc.get("command") == "tune":
            sweeps.extend(tune_lines(doc, peers))
            continue
        if is_sweep(doc):
            sweeps.append(sweep_line(doc))
            continue
        for label, who, target, ms, p in rows(doc, peers):
            if p is None or "median_ms" not in p:
                print(f"{label:<46} {who:<18} {target:>6.2f} {ms:>10.3f} {'-':>9} {'-':>6}  (no peer)")
                continue
            ratio = p["median_ms"] / ms
            print(f"{label:<46} {who:<18} {target:>6.2f} {ms:>10.3f} {p['median_ms']:>9.3f} "
                  f"{ratio:>6.3f}  {'yes' if ratio >= target else 'NO'}")
    for line in sweeps:
        print(line)


if __name__ == "__main__":
    main()
