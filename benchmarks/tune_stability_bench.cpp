// SPDX-License-Identifier: Apache-2.0
// Winner stability: N fresh processes tune the same key on the CPU backend, with candidates whose
// speeds differ by 10 % or more; every process should pick the same winner.
//   tune_stability_bench [processes = 20]      (runs itself with --child)
#include <cubert/client.hpp>
#include <cubert/tune/local_tuner.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace {

void spin_for(std::chrono::microseconds d) {
  auto const end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
}

int child() {
  auto client = cubert::make_client("cpu");
  using set_t = cubert::tune::tunable_set<std::string, int, int>;
  // 300, 270 (fastest, 10 % ahead), 330 and 363 µs per launch.
  int const cost_us[] = {300, 270, 330, 363};
  set_t set([](int const&) { return std::string("stability"); },
            [](std::string const&, int const& x) { return std::tuple<int>(x); });
  for (int i = 0; i < 4; ++i) {
    auto k = cubert::kernel::builder(fmt::format("spin{}", i))
                 .cpu([us = cost_us[i]](cubert::cpu::kernel_context const&) {
                   spin_for(std::chrono::microseconds(us));
                 })
                 .build();
    set.with(k.name(), [client, k, i](int) {
      client.execute(k, cubert::cube_count{1}, cubert::bindings{});
      return i;
    });
  }
  cubert::tune::tuner_options o;
  o.cache_enabled = false;
  cubert::tune::local_tuner<std::string> tuner("stability", o);
  auto shared = std::make_shared<set_t const>(std::move(set));
  int const winner = tuner.execute("cpu", client, shared, 0);
  client.sync();
  std::printf("%d\n", winner);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--child") return child();
  int const n = argc > 1 ? std::atoi(argv[1]) : 20;
  std::map<int, int> winners;
  auto const t0 = std::chrono::steady_clock::now();
  for (int p = 0; p < n; ++p) {
    std::FILE* f = ::popen(fmt::format("{} --child", argv[0]).c_str(), "r");
    int w = -1;
    if (f == nullptr || std::fscanf(f, "%d", &w) != 1) w = -1;
    if (f != nullptr) ::pclose(f);
    ++winners[w];
  }
  auto const s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto [w, count] : winners) std::printf("winner %d: %d/%d processes\n", w, count, n);
  std::printf("expected winner 1; %.2f s for %d processes\n", s, n);
  return winners[1] == n ? 0 : 1;
}
