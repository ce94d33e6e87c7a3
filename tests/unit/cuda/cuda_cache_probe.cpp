// SPDX-License-Identifier: Apache-2.0
// Test helper run as a separate process.
//   cuda_cache_probe compile <cache dir> <arch>  -> prints "hit" or "miss" for a fixed source
//   cuda_cache_probe devices                     -> prints "<count>\n<unavailable reason>\n"
//                                                   then what make_properties(0) gave
//   cuda_cache_probe client                      -> make_client("cuda:0"), then prints
//                                                   "client of <name>"
#include "cuda_compiler.hpp"

#include <cubert/client.hpp>
#include <cubert/cuda.hpp>
#include <cubert/error.hpp>

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

constexpr char const* probe_source = R"(
extern "C" __global__ void probe_scale(float* x, float a, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
})";

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 4 && std::string_view(argv[1]) == "compile") {
      cubert::cuda::detail::cuda_compiler const compiler{
          cubert::cuda::detail::kernel_disk_cache(argv[2], "cuda")};
      auto const code = compiler.compile({probe_source, "probe.cu", {}, std::atoi(argv[3])});
      std::printf("%s\n", code.from_disk_cache ? "hit" : "miss");
      return code.image.empty() ? 1 : 0;
    }
    if (argc == 2 && std::string_view(argv[1]) == "devices") {
      std::printf("%d\n%s\n", cubert::cuda::device_count(),
                  cubert::cuda::unavailable_reason().c_str());
      try {
        auto const p = cubert::cuda::make_properties(0);
        std::printf("properties: %s, compiler '%s'\n", p.name.c_str(), p.compiler.c_str());
      } catch (cubert::unsupported const& e) {
        std::printf("unsupported: %s\n", e.what());
      } catch (cubert::error const& e) {
        std::printf("other error: %s\n", e.what());
      }
      return 0;
    }
    if (argc == 2 && std::string_view(argv[1]) == "client") {
      auto const c = cubert::make_client("cuda:0");
      c.sync();
      std::printf("client of %s\n", c.properties().name.c_str());
      return 0;
    }
    std::fprintf(stderr, "usage: cuda_cache_probe compile <dir> <arch> | devices | client\n");
    return 2;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "cuda_cache_probe: %s\n", e.what());
    return 1;
  }
}
