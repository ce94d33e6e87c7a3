// SPDX-License-Identifier: Apache-2.0
#include <cubert/tune/tuner.hpp>

namespace cubert::tune {

tuner_options tuner_options::from(config const& cfg) {
  tuner_options o;
  o.cache_enabled = cfg.autotune.cache_enabled;
  o.cache_dir = cfg.autotune.cache_dir;
  o.checks = cfg.autotune.checks;
  o.background = cfg.autotune.background;
  o.concurrent = cfg.autotune.concurrent;
  o.log_decisions = cfg.autotune.log_decisions;
  o.level = cfg.autotune.level;
  switch (cfg.autotune.level) {
    case autotune_level::minimal:
      o.bench.max_samples = 5;
      break;
    case autotune_level::balanced:
      break;
    case autotune_level::extensive:
      o.bench.max_samples = 20;
      o.bench.min_samples = 5;
      break;
    case autotune_level::full:
      o.bench.max_samples = 30;
      o.bench.min_samples = 10;
      o.bench.warmup = 3;
      break;
  }
  return o;
}

}  // namespace cubert::tune
