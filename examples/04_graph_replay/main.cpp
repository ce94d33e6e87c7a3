// SPDX-License-Identifier: Apache-2.0
// A step of work captured once and replayed on new inputs: fill an accumulator, add the input
// to it twice, copy the result out. Between replays the input buffer is overwritten in place
// with `write`; the graph keeps using the buffers it was captured with.
#include <cubert/cubert.hpp>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  auto client = cubert::make_client(argc > 1 ? argv[1] : "cpu");

  std::uint32_t const n = 4096;
  auto add = cubert::kernel::builder("accumulate_f32")
                 .cube_dim(256, 1, 1)
                 .cpu([](cubert::cpu::kernel_context const& ctx) {
                   auto acc = ctx.buffer<float>(0);
                   auto in = ctx.buffer<float const>(1);
                   auto const len = ctx.scalar<std::uint32_t>();
                   for (std::uint32_t u = 0; u < ctx.dim.x; ++u) {
                     auto const i = ctx.cube_index() * ctx.dim.x + u;
                     if (i < len) acc[i] += in[i];
                   }
                 })
                 .cuda_source(R"(extern "C" __global__ void accumulate_f32(float* acc,
                                                               const float* in, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) acc[i] += in[i];
})",
                              "accumulate_f32")
                 .build();
  cubert::handle input = client.empty(n * sizeof(float));
  cubert::handle acc = client.empty(n * sizeof(float));
  cubert::handle result = client.empty(n * sizeof(float));
  auto const args =
      cubert::bindings{}.with_buffers({acc.binding(), input.binding()}).with_scalar(n);

  cubert::graph const step = client.capture([&] {
    client.fill(acc.binding(), 1.0f);
    client.execute(add, cubert::cube_count{(n + 255) / 256}, args);
    client.execute(add, cubert::cube_count{(n + 255) / 256}, args);
    client.copy(acc.binding(), result.binding());
  });

  std::vector<float> in(n);
  for (int round = 0; round < 3; ++round) {
    for (std::uint32_t i = 0; i < n; ++i) in[i] = static_cast<float>(round * 1000 + i);
    client.write(input.binding(), std::as_bytes(std::span{in}));  // Done with `in` on return.
    client.replay(step);
    cubert::bytes got = client.read_one(result.binding());  // Waits for the replay.
    auto const* out = reinterpret_cast<float const*>(got.data());
    for (std::uint32_t i = 0; i < n; ++i) {
      if (out[i] != 1.0f + 2.0f * in[i]) {
        std::printf("round %d: mismatch at %u\n", round, i);
        return 1;
      }
    }
  }
  std::printf("graph of %zu steps (%s) replayed 3 times on %s: correct\n", step.size(),
              step.native() ? "one device graph" : "replayed step by step",
              client.properties().name.c_str());
  return 0;
}
