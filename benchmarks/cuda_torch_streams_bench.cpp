// SPDX-License-Identifier: Apache-2.0
// PyTorch's streams measured as cuda_bench's streams rows measure cubert's: 4 × 100 sleep
// kernels of ~50 µs (one block, at::cuda::sleep, calibrated) on one stream and on four
// torch streams; a 64 MiB ping-pong between two streams, 10^4 rounds, with `record_stream` so
// that the caching allocator may reuse a block the other stream still reads, and its peak
// reserved bytes. Built only by scripts/gpu-check.sh against the machine's libtorch; prints
// "key value" lines that cuda_bench reads with --torch.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/Sleep.h>
#include <algorithm>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace alloc = c10::cuda::CUDACachingAllocator;
namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Milliseconds of `per_stream` sleeps on each of four slots, the slots mapped onto `streams`.
double sleep_ms(std::vector<c10::cuda::CUDAStream> const& streams, std::int64_t cycles,
                int per_stream) {
  auto const run = [&] {
    double const t0 = now_ms();
    for (int i = 0; i < per_stream; ++i) {
      for (std::size_t s = 0; s < 4; ++s) {
        c10::cuda::CUDAStreamGuard const on(streams[s % streams.size()]);
        at::cuda::sleep(cycles);
      }
    }
    c10::cuda::device_synchronize();
    return now_ms() - t0;
  };
  (void)run();
  std::vector<double> ms;
  for (int r = 0; r < 5; ++r) ms.push_back(run());
  return median(ms);
}

}  // namespace

int main() {
  std::fprintf(stderr, "cuda_torch_streams_bench: %d devices\n",
               static_cast<int>(c10::cuda::device_count()));
  // A tensor first: PyTorch initialises its CUDA state (and the stream pools) lazily.
  (void)at::zeros({1}, at::TensorOptions().device(at::kCUDA));
  std::vector<c10::cuda::CUDAStream> four;
  for (int s = 0; s < 4; ++s) four.push_back(c10::cuda::getStreamFromPool(false));
  std::fprintf(stderr, "cuda_torch_streams_bench: streams made\n");
  std::vector<c10::cuda::CUDAStream> const one{four[0]};
  // Cycles for ~50 µs per kernel: 400 sleeps on one stream at a first guess, then scaled.
  std::int64_t cycles = 100'000;
  double const guess = sleep_ms(one, cycles, 100) / 400.0;
  cycles = static_cast<std::int64_t>(static_cast<double>(cycles) * 0.050 / guess);
  double const t1 = sleep_ms(one, cycles, 100);
  double const t4 = sleep_ms(four, cycles, 100);
  std::printf("streams_sleep_us %.3f\n", t1 / 400.0 * 1e3);
  std::printf("streams_one_ms %.4f\n", t1);
  std::printf("streams_four_ms %.4f\n", t4);

  constexpr std::int64_t floats = (64LL << 20) / 4;
  auto const a = four[0];
  auto const b = four[1];
  auto const options = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  alloc::emptyCache();
  alloc::resetPeakStats(0);
  at::Tensor out;
  {
    c10::cuda::CUDAStreamGuard const on(b);
    out = at::empty({floats}, options);
  }
  for (int i = 0; i < 10'000; ++i) {
    at::Tensor x;
    {
      c10::cuda::CUDAStreamGuard const on(a);
      x = at::empty({floats}, options);
      x.fill_(static_cast<float>(i));
    }
    at::cuda::CUDAEvent filled;
    filled.record(a);
    filled.block(b);  // PyTorch leaves the cross-stream order to its user.
    {
      c10::cuda::CUDAStreamGuard const on(b);
      out.copy_(x);
    }
    alloc::recordStream(x.storage().data_ptr(), b);
  }
  c10::cuda::device_synchronize();
  auto const stats = alloc::getDeviceStats(0);
  std::printf("pingpong_peak_bytes %lld\n", static_cast<long long>(stats.reserved_bytes[0].peak));
  return 0;
}
