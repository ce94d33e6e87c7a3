// SPDX-License-Identifier: Apache-2.0
// The README's example: upload two vectors, launch an elementwise add on a device (the CPU by
// default, or the one named: opencl:0, cuda:0), read the result back and check it. The kernel
// carries a native body for the CPU and one portable source for CUDA and OpenCL.
#include <cubert/cubert.hpp>

#include <cstdio>
#include <vector>

namespace {

constexpr char const* add_src = R"(
CUBERT_KERNEL add_f32(CUBERT_GLOBAL const float* a, CUBERT_GLOBAL const float* b,
                      CUBERT_GLOBAL float* out, uint n) {
  uint i = CUBERT_ABSOLUTE_POS_X;
  if (i < n) out[i] = a[i] + b[i];
})";

}  // namespace

int main(int argc, char** argv) {
  auto client = cubert::make_client(argc > 1 ? argv[1] : "cpu");

  std::size_t const n = 1000;
  std::vector<float> xs(n), ys(n);
  for (std::size_t i = 0; i < n; ++i) {
    xs[i] = static_cast<float>(i);
    ys[i] = 2.0f * static_cast<float>(i);
  }
  cubert::handle a = client.create(std::as_bytes(std::span{xs}));
  cubert::handle b = client.create(std::as_bytes(std::span{ys}));
  cubert::handle out = client.empty(n * sizeof(float));

  // One CPU task per cube; the kernel loops over the units of its cube.
  auto add = cubert::kernel::builder("add_f32")
                 .cube_dim(256, 1, 1)
                 .cpu([](cubert::cpu::kernel_context const& ctx) {
                   auto lhs = ctx.buffer<float const>(0);
                   auto rhs = ctx.buffer<float const>(1);
                   auto dst = ctx.buffer<float>(2);
                   auto const len = ctx.scalar<std::uint32_t>();
                   for (std::uint32_t u = 0; u < ctx.dim.x; ++u) {
                     auto const i = ctx.cube_index() * ctx.dim.x + u;
                     if (i < len) dst[i] = lhs[i] + rhs[i];
                   }
                 })
                 .portable_source(add_src, "add_f32")
                 .build();
  client.execute(add, cubert::cube_count{static_cast<std::uint32_t>((n + 255) / 256)},
                 cubert::bindings{}
                     .with_buffers({a.binding(), b.binding(), out.binding()})
                     .with_scalar(static_cast<std::uint32_t>(n)));

  cubert::bytes got = client.read_one(out.binding());  // waits for the launch
  auto const* result = reinterpret_cast<float const*>(got.data());
  for (std::size_t i = 0; i < n; ++i) {
    if (result[i] != 3.0f * static_cast<float>(i)) {
      std::printf("mismatch at %zu\n", i);
      return 1;
    }
  }
  std::printf("add_f32 on %s: %zu elements correct\n", client.properties().name.c_str(), n);
  std::printf("%s", client.memory_usage().to_string().c_str());
  return 0;
}
