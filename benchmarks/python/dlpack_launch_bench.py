# SPDX-License-Identifier: Apache-2.0
"""Host cost of cubert from Python against PyTorch in the same process (issue 41's figures):
a cached kernel launch (`Client.execute`) against `torch.add(x, y, out=z)` on 1024 floats, and a
DLPack export to torch (`torch.from_dlpack(cubert_tensor)`) against torch's own
(`torch.from_dlpack(torch_tensor)`), and a round trip (`cubert.from_dlpack(torch.from_dlpack(t))`)
against torch's own (`torch.from_dlpack(torch.from_dlpack(x))`). Rounds alternate; medians.
Usage: python dlpack_launch_bench.py [device]   (default cuda:0; needs torch)."""
import statistics
import sys
import time

import numpy as np
import torch

import cubert

ADD = """
CUBERT_KERNEL add_f32(CUBERT_GLOBAL const float* a, CUBERT_GLOBAL const float* b,
                      CUBERT_GLOBAL float* out, uint n) {
  uint i = CUBERT_ABSOLUTE_POS_X;
  if (i < n) out[i] = a[i] + b[i];
}
"""

# The same kernel with its size built in: a launch without a scalar, to split the cost.
ADD_1024 = """
CUBERT_KERNEL add_1024(CUBERT_GLOBAL const float* a, CUBERT_GLOBAL const float* b,
                       CUBERT_GLOBAL float* out) {
  uint i = CUBERT_ABSOLUTE_POS_X;
  if (i < 1024u) out[i] = a[i] + b[i];
}
"""


def per_call(fn, count):
    start = time.perf_counter()
    for _ in range(count):
        fn()
    return (time.perf_counter() - start) / count


def main():
    device = sys.argv[1] if len(sys.argv) > 1 else "cuda:0"
    c = cubert.client(device)
    n = 1024
    k = cubert.Kernel("add_f32", ADD, cube_dim=[256])
    k_fixed = cubert.Kernel("add_1024", ADD_1024, cube_dim=[256])
    a = c.create(np.ones(n, np.float32))
    b = c.create(np.ones(n, np.float32))
    out = c.empty([n])
    size = np.uint32(n)
    grid = (n + 255) // 256
    tdev = "cuda" if device.startswith("cuda") else "cpu"
    x = torch.ones(n, device=tdev)
    y = torch.ones(n, device=tdev)
    z = torch.empty(n, device=tdev)

    def launch():
        c.execute(k, grid, a, b, out, size)

    def launch_no_scalar():
        c.execute(k_fixed, grid, a, b, out)

    def torch_add():
        torch.add(x, y, out=z)

    def export():
        torch.from_dlpack(out)

    def torch_export():
        torch.from_dlpack(z)

    def round_trip():
        cubert.from_dlpack(torch.from_dlpack(out))

    def torch_round_trip():
        torch.from_dlpack(torch.from_dlpack(z))

    def sync():
        c.sync()
        if tdev == "cuda":
            torch.cuda.synchronize()

    for f in (launch, launch_no_scalar, torch_add, export, torch_export, round_trip, torch_round_trip):
        for _ in range(200):
            f()
    sync()
    rows = {"launch": [], "launch, no scalar": [], "torch.add": [], "export": [], "torch export": [], "round trip": [],
            "torch round trip": []}
    count = 20000
    for _ in range(7):
        rows["launch"].append(per_call(launch, count))
        sync()
        rows["launch, no scalar"].append(per_call(launch_no_scalar, count))
        sync()
        rows["torch.add"].append(per_call(torch_add, count))
        sync()
        rows["export"].append(per_call(export, count // 10))
        rows["torch export"].append(per_call(torch_export, count // 10))
        rows["round trip"].append(per_call(round_trip, count // 10))
        rows["torch round trip"].append(per_call(torch_round_trip, count // 10))
        sync()
    med = {name: statistics.median(v) * 1e6 for name, v in rows.items()}
    print(f"device {device}; torch {torch.__version__}; medians of 7 rounds, µs per call")
    for name, us in med.items():
        print(f"{name:18s} {us:8.3f}")
    print(f"launch / torch.add: {med['launch'] / med['torch.add']:.3f} (target <= 1.2)")
    print(f"export / torch export: {med['export'] / med['torch export']:.3f}")
    print(f"round trip / torch round trip: {med['round trip'] / med['torch round trip']:.3f} "
          "(target <= 1.0)")
    np.testing.assert_array_equal(out.numpy(), np.full(n, 2, np.float32))


if __name__ == "__main__":
    main()
