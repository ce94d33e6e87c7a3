// SPDX-License-Identifier: Apache-2.0
// Transfer sizes between the small rows and the 256 MiB ones: `create` (+ sync) and `read_into`
// of pageable memory at 256 KiB, 2 MiB, 8 MiB and 32 MiB through a client on the mutex channel,
// against the driver's own pageable copies and a pinned DMA of the same bytes. Where the copy
// threads start to share the work (2 MiB) their hand-off costs the most relative to the copy.
// Blocks of each figure take turns; figures are medians of the blocks.
#include "cuda_bench.hpp"
#include "cuda_bench_context.hpp"
#include "cuda_library.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cuda.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace cubert::bench {
namespace {

using cuda::detail::check;
using cuda::detail::driver;

struct timed {
  std::function<void()> op;
  std::vector<double> seconds{};
};

std::string label(std::size_t size) {
  return size >= (std::size_t{1} << 20) ? fmt::format("{} MiB", size >> 20)
                                        : fmt::format("{} KiB", size >> 10);
}

}  // namespace

void transfer_size_rows(std::vector<row>& rows) {
  context const c;
  auto const& api = driver();
  auto* const copy_up = driver_symbol<decltype(::cuMemcpyHtoD)>("cuMemcpyHtoD_v2");
  auto* const copy_down = driver_symbol<decltype(::cuMemcpyDtoH)>("cuMemcpyDtoH_v2");
  cuda::options opts;
  opts.kernel_cache_dir = std::filesystem::path{};
  client const cl(cuda::make_client(0, opts, cubert::channel_kind::mutex));
  constexpr std::size_t largest = std::size_t{32} << 20;
  std::vector<std::byte> src(largest, std::byte{5});
  std::vector<std::byte> dst(largest);
  raw_buffers const raw(largest);
  auto const dev_handle = cl.empty(largest);

  for (std::size_t size :
       {std::size_t{256} << 10, std::size_t{2} << 20, std::size_t{8} << 20, largest}) {
    std::span<std::byte const> const up_src(src.data(), size);
    std::span<std::byte> const down_dst(dst.data(), size);
    auto const view = dev_handle.offset_end(largest - size);
    std::vector<timed> f;
    f.push_back({[&] {
      auto h = cl.create(up_src);
      cl.sync();
    }});
    f.push_back({[&] { check(copy_up(raw.dev, up_src.data(), size), "cuMemcpyHtoD"); }});
    f.push_back({[&] {
      check(api.cuMemcpyHtoDAsync(raw.dev, raw.pinned, size, c.stream), "cuMemcpyHtoDAsync");
      check(api.cuStreamSynchronize(c.stream), "cuStreamSynchronize");
    }});
    f.push_back({[&] { cl.read_into(view.binding(), down_dst); }});
    f.push_back({[&] { check(copy_down(down_dst.data(), raw.dev, size), "cuMemcpyDtoH"); }});
    f.push_back({[&] {
      check(api.cuMemcpyDtoHAsync(raw.pinned, raw.dev, size, c.stream), "cuMemcpyDtoHAsync");
      check(api.cuStreamSynchronize(c.stream), "cuStreamSynchronize");
    }});
    int const per_block =
        static_cast<int>(std::max<std::size_t>(2, (std::size_t{64} << 20) / size));
    for (int b = 0; b < 18; ++b) {
      for (auto& t : f) {
        double const t0 = now_s();
        for (int i = 0; i < per_block; ++i) t.op();
        if (b >= 3) t.seconds.push_back((now_s() - t0) / per_block);  // After the warm-up.
      }
    }
    auto const gbs = [&](std::size_t i) {
      return static_cast<double>(size) / median(f[i].seconds) / 1e9;
    };
    auto const name = label(size);
    rows.push_back(rate_row(fmt::format("create {} pageable + sync", name), gbs(0), gbs(2), "GB/s",
                            "pinned DMA + sync", 0));
    rows.push_back(rate_row(fmt::format("create {} pageable + sync", name), gbs(0), gbs(1), "GB/s",
                            "driver's pageable cuMemcpyHtoD", 0));
    rows.push_back(rate_row(fmt::format("read_into {} pageable", name), gbs(3), gbs(5), "GB/s",
                            "pinned DMA + sync", 0));
    rows.push_back(rate_row(fmt::format("read_into {} pageable", name), gbs(3), gbs(4), "GB/s",
                            "driver's pageable cuMemcpyDtoH", 0));
  }
}

}  // namespace cubert::bench
