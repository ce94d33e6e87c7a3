// SPDX-License-Identifier: Apache-2.0
// One "process" of the multi-process tests: tunes keys 0..n-1 against a cache directory and
// prints how many candidates it benchmarked and which won.
//   cubert_tune_helper <cache dir> <keys> [fast index] [wait]
// With `wait`, a key another process is tuning is waited for; without, candidate 0 runs then.
#include "fake_client.hpp"

#include <cubert/tune/local_tuner.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <cache dir> <keys> [fast index]\n", argv[0]);
    return 2;
  }
  int const keys = std::atoi(argv[2]);
  std::size_t const fast = argc > 3 ? static_cast<std::size_t>(std::atoi(argv[3])) : 2;
  cubert::tune::tuner_options opts;
  opts.cache_dir = argv[1];
  if (argc > 4 && std::string(argv[4]) == "wait") {
    opts.concurrent = cubert::concurrent_policy::wait;
  }
  cubert::tune::local_tuner<std::string> tuner("multiprocess", opts);
  using set_t = cubert::tune::tunable_set<std::string, int, int>;
  set_t set([](int const& k) { return "key" + std::to_string(k); },
            [](std::string const&, int const& k) { return std::tuple<int>(k); });
  for (std::size_t i = 0; i < 4; ++i) {
    set.with("candidate" + std::to_string(i), [i, fast](int) {
      cubert::test::spin_for(
          i == fast ? 20us : std::chrono::microseconds(300 + 100 * static_cast<int>(i)));
      return static_cast<int>(i);
    });
  }
  auto shared = std::make_shared<set_t const>(std::move(set));
  cubert::test::fake_client client("helper device");
  std::string winners;
  for (int k = 0; k < keys; ++k) {
    winners += std::to_string(tuner.execute("dev", client, shared, k));
  }
  std::printf("benchmarked=%zu winners=%s\n", tuner.tuner_for("dev", client)->benchmarked(),
              winners.c_str());
  return 0;
}
