// SPDX-License-Identifier: Apache-2.0
// Test helper run as a separate process (the loader and the device list are read once per
// process, so a test of another environment needs another process).
//   opencl_probe build <cache dir>  -> builds one kernel through the disk cache and runs it;
//                                      prints "built" or "disk hit"
//   opencl_probe devices            -> prints "<count>\n<unavailable reason>\n", then what
//                                      make_client("opencl:0") says
#include "channel/channel.hpp"
#include "opencl_server.hpp"

#include <cubert/client.hpp>
#include <cubert/error.hpp>
#include <cubert/opencl.hpp>

#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

namespace {

cubert::kernel probe_kernel() {
  return cubert::kernel::builder("opencl_probe::scale")
      .cube_dim(64)
      .opencl_source(R"(__kernel void scale(__global float* x, float a, uint n) {
  size_t i = get_global_id(0);
  if (i < n) x[i] *= a;
})",
                     "scale")
      .build();
}

int build(char const* dir) {
  cubert::opencl::options opts;
  opts.kernel_cache_dir = dir;
  auto server = cubert::opencl::make_server(0, opts);
  auto const* cl = dynamic_cast<cubert::opencl::detail::opencl_server*>(server.get());
  cubert::client c(cubert::backend::make_channel(std::move(server), cubert::channel_kind::mutex));
  std::vector<float> xs(100, 2.f);
  auto h = c.create(std::as_bytes(std::span{xs}));
  c.execute(probe_kernel(), cubert::cube_count{2},
            cubert::bindings{}.with_buffer(h.binding()).with_scalar(3.f).with_scalar(100u));
  auto const out = c.read_one(h.binding());
  float first = 0;
  std::memcpy(&first, out.data(), sizeof first);
  if (first != 6.f) {
    std::fprintf(stderr, "opencl_probe: the kernel computed %g, not 6\n", first);
    return 1;
  }
  auto const& stats = cl->kernel_stats();
  std::printf("%s\n", stats.disk_hits == 1 && stats.built == 0   ? "disk hit"
                      : stats.built == 1 && stats.disk_hits == 0 ? "built"
                                                                 : "neither");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 3 && std::string_view(argv[1]) == "build") return build(argv[2]);
    if (argc == 2 && std::string_view(argv[1]) == "devices") {
      std::printf("%d\n%s\n", cubert::opencl::device_count(),
                  cubert::opencl::unavailable_reason().c_str());
      try {
        auto const c = cubert::make_client("opencl:0");
        std::printf("client of %s\n", c.properties().name.c_str());
      } catch (cubert::unsupported const& e) {
        std::printf("unsupported: %s\n", e.what());
      }
      return 0;
    }
    std::fprintf(stderr, "usage: opencl_probe build <dir> | devices\n");
    return 2;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "opencl_probe: %s\n", e.what());
    return 1;
  }
}
