# SPDX-License-Identifier: Apache-2.0
"""The GPU peers of cubert's kernel library, measured in the same run as `cubert bench`:
cuBLAS through torch.matmul (f32 without TF32, f16, bf16), torch.add, torch.sum (whole and per
row), and a Triton matmul autotuned over the eight configurations of Triton's tutorial. Prints
one JSON object: {"peers": [{"figure", "shape", "dtype", "median_ms", "tflops"|"gbs"}...]}.
The Triton rows also give "autotune_s", the wall time of the first call (compiling and timing
the eight configurations into an empty Triton cache: TRITON_CACHE_DIR is a fresh folder).

Run with the torch environment's python: python torch_ops_peers.py [--quick]."""
import json
import os
import statistics
import sys
import tempfile
import time

# Before Triton is imported: its autotune is timed cold, as cubert's is.
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="cubert-triton-cache-")

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def median_ms(fn, repeat=20):
    fn()
    torch.cuda.synchronize()
    start = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
    for s, e in zip(start, end):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(start, end))


def matmul_rows(shapes, dtypes):
    rows = []
    for dt in dtypes:
        for m, n, k in shapes:
            a = torch.randn(m, k, device="cuda", dtype=dt)
            b = torch.randn(k, n, device="cuda", dtype=dt)
            ms = median_ms(lambda: torch.matmul(a, b))
            rows.append({"figure": "cublas", "shape": f"{m}x{n}x{k}", "dtype": str(dt)[6:],
                         "median_ms": ms, "tflops": 2 * m * n * k / ms / 1e9})
    return rows


def memory_rows():
    rows = []
    n = 64 << 20  # 256 MiB of f32 per operand
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    out = torch.empty_like(a)
    ms = median_ms(lambda: torch.add(a, b, out=out))
    rows.append({"figure": "torch.add", "shape": str(n), "dtype": "float32", "median_ms": ms,
                 "gbs": 3 * 4 * n / ms / 1e6})
    ms = median_ms(lambda: torch.sum(a))
    rows.append({"figure": "torch.sum", "shape": str(n), "dtype": "float32", "median_ms": ms,
                 "gbs": 4 * n / ms / 1e6})
    x = torch.randn(8192, 8192, device="cuda")
    ms = median_ms(lambda: torch.sum(x, dim=1))
    rows.append({"figure": "torch.sum(dim=1)", "shape": "8192x8192", "dtype": "float32",
                 "median_ms": ms, "gbs": 4 * 8192 * 8192 / ms / 1e6})
    return rows


def triton_rows(shapes):
    try:
        import triton
        import triton.language as tl
    except ImportError as e:  # The peer is absent: say so, do not fail.
        return [{"figure": "triton", "error": str(e)}]

    configs = [triton.Config({"BM": bm, "BN": bn, "BK": bk, "GM": 8}, num_stages=s, num_warps=w)
               for bm, bn, bk, s, w in [(128, 256, 64, 3, 8), (64, 256, 32, 4, 4),
                                        (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
                                        (64, 128, 32, 4, 4), (128, 32, 32, 4, 4),
                                        (64, 32, 32, 5, 2), (32, 64, 32, 5, 2)]]

    @triton.autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def mm(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GM: tl.constexpr):
        pid = tl.program_id(0)
        blocks_m = tl.cdiv(M, BM)
        blocks_n = tl.cdiv(N, BN)
        group = GM * blocks_n
        first_m = (pid // group) * GM
        rows = tl.minimum(blocks_m - first_m, GM)
        pm = first_m + (pid % group) % rows
        pn = (pid % group) // rows
        om = (pm * BM + tl.arange(0, BM)) % M
        on = (pn * BN + tl.arange(0, BN)) % N
        ok = tl.arange(0, BK)
        pa = a + om[:, None] * sam + ok[None, :] * sak
        pb = b + ok[:, None] * sbk + on[None, :] * sbn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kk in range(0, tl.cdiv(K, BK)):
            va = tl.load(pa, mask=ok[None, :] < K - kk * BK, other=0.0)
            vb = tl.load(pb, mask=ok[:, None] < K - kk * BK, other=0.0)
            acc = tl.dot(va, vb, acc)
            pa += BK * sak
            pb += BK * sbk
        cm = pm * BM + tl.arange(0, BM)
        cn = pn * BN + tl.arange(0, BN)
        pc = c + cm[:, None] * scm + cn[None, :] * scn
        tl.store(pc, acc.to(c.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))

    rows = []
    for m, n, k in shapes:
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        c = torch.empty(m, n, device="cuda", dtype=torch.float16)

        def run():
            grid = lambda meta: (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)
            mm[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                     c.stride(0), c.stride(1))

        torch.cuda.synchronize()
        start = time.perf_counter()
        run()  # Autotunes: compiles and times the eight configurations (a cold cache: see main).
        torch.cuda.synchronize()
        tune_s = time.perf_counter() - start
        ms = median_ms(run)
        rows.append({"figure": "triton", "shape": f"{m}x{n}x{k}", "dtype": "float16",
                     "median_ms": ms, "tflops": 2 * m * n * k / ms / 1e9,
                     "autotune_s": tune_s, "configs": len(configs)})
    return rows


def main():
    quick = "--quick" in sys.argv
    big = [(4096, 4096, 4096), (8192, 8192, 8192)]
    rows = matmul_rows(big, [torch.float32, torch.float16, torch.bfloat16])
    rows += memory_rows()
    rows += triton_rows(big if not quick else big[:1])
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "peers": rows}, indent=1))


if __name__ == "__main__":
    main()
