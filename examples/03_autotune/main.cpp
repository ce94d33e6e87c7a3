// SPDX-License-Identifier: Apache-2.0
// Autotuning on the CPU device: three variants of a scale kernel that differ in how many
// elements each cube handles. The tuner benchmarks them once per anchored size (on generated
// inputs, so the caller's buffers are never touched), keeps the fastest in memory and in the
// persistent cache, and runs it. A second run of this program benchmarks nothing.
#include <cubert/cubert.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace {

using set_t = cubert::tune::tunable_set<std::string, void, cubert::handle, cubert::handle>;

cubert::kernel scale_kernel(std::uint32_t per_cube) {
  return cubert::kernel::builder("scale_x2_per_cube_" + std::to_string(per_cube))
      .cube_dim(per_cube, 1, 1)
      .cpu([](cubert::cpu::kernel_context const& ctx) {
        auto in = ctx.buffer<float const>(0);
        auto out = ctx.buffer<float>(1);
        auto const begin = ctx.cube_index() * ctx.dim.x;
        for (std::uint64_t i = begin; i < begin + ctx.dim.x && i < out.size(); ++i) {
          out[i] = 2.0f * in[i];
        }
      })
      .build();
}

set_t make_set(cubert::client client) {
  set_t set(
      [](cubert::handle const& in, cubert::handle const&) {
        return "scale-" + std::to_string(cubert::tune::anchor(in.size() / sizeof(float)));
      },
      [client](std::string const&, cubert::handle const& in, cubert::handle const& out) {
        return std::tuple<cubert::handle, cubert::handle>{client.empty(in.size()),
                                                          client.empty(out.size())};
      });
  for (std::uint32_t per_cube : {64u, 4096u, 65536u}) {
    auto k = scale_kernel(per_cube);
    set.with(k.name(), [client, k, per_cube](cubert::handle in, cubert::handle out) {
      auto const n = static_cast<std::uint32_t>(out.size() / sizeof(float));
      client.execute(k, cubert::cube_count{(n + per_cube - 1) / per_cube},
                     cubert::bindings{}.with_buffers({in.binding(), out.binding()}));
    });
  }
  return set;
}

}  // namespace

int main() {
  auto client = cubert::make_client("cpu");
  static cubert::tune::local_tuner<std::string> tuner("example-scale");
  auto set = tuner.init([&] { return make_set(client); });

  std::vector<float> xs(1 << 20, 1.5f);
  auto in = client.create(std::as_bytes(std::span{xs}));
  auto out = client.empty(xs.size() * sizeof(float));
  tuner.execute("cpu", client, set, in, out);

  cubert::bytes got = client.read_one(out.binding());  // pooled pinned memory on CUDA
  auto const* ys = reinterpret_cast<float const*>(got.data());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (ys[i] != 3.0f) {
      std::printf("wrong result at %zu\n", i);
      return 1;
    }
  }
  auto const t = tuner.tuner_for("cpu", client);
  // With autotune.background on (CUBERT_AUTOTUNE_BACKGROUND=1) the tuning runs on a worker
  // while execute() runs candidate 0: wait for it before asking for the winner.
  t->wait_idle();
  auto const key = "scale-" + std::to_string(cubert::tune::anchor(xs.size()));
  auto const winner = t->fastest(key);
  if (!winner) {
    std::printf("key %s was not tuned\n", key.c_str());
    return 1;
  }
  std::printf("key %s: fastest candidate %zu (%s)\n", key.c_str(), *winner,
              set->at(*winner).name().c_str());
  return 0;
}
