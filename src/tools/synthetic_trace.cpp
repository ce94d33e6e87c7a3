// SPDX-License-Identifier: Apache-2.0
// Generated allocation traces. The generator is written out (a 64-bit Mersenne twister and our
// own scaling) because the standard distributions differ between standard libraries, and a
// figure in the docs must replay to the same trace everywhere.
#include "trace_replay.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

#include <cmath>
#include <random>
#include <sstream>
#include <vector>

namespace cubert::memory {

namespace {

constexpr std::uint64_t mib = 1024 * 1024;

class generator {
 public:
  explicit generator(std::uint64_t seed) : rng_(seed) {}
  /// Uniform in [0, 1).
  double unit() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }
  /// Uniform integer in [lo, hi].
  std::uint64_t between(std::uint64_t lo, std::uint64_t hi) {
    return lo + static_cast<std::uint64_t>(unit() * static_cast<double>(hi - lo + 1));
  }
  /// Log-uniform in [lo, hi).
  std::uint64_t log_uniform(std::uint64_t lo, std::uint64_t hi) {
    double const a = std::log(static_cast<double>(lo));
    double const b = std::log(static_cast<double>(hi));
    return static_cast<std::uint64_t>(std::exp(a + (b - a) * unit()));
  }

 private:
  std::mt19937_64 rng_;
};

// Writes the events as trace text, so the parser computes slots and peaks as for a file.
class trace_writer {
 public:
  std::uint64_t alloc(std::uint64_t size) {
    out_ << "a " << ++next_ << ' ' << size << '\n';
    return next_;
  }
  void free(std::uint64_t id) { out_ << "f " << id << '\n'; }
  [[nodiscard]] std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::uint64_t next_ = 0;
};

std::string random_mix(generator& g, std::uint64_t events) {
  trace_writer w;
  std::vector<std::uint64_t> live;
  for (std::uint64_t i = 0; i < events; ++i) {
    if (!live.empty() && (g.unit() < 0.5 || live.size() > 400)) {
      auto const k = g.between(0, live.size() - 1);
      w.free(live[k]);
      live[k] = live.back();
      live.pop_back();
    } else {
      live.push_back(w.alloc(g.log_uniform(256, 256 * mib)));
    }
  }
  return w.text();
}

std::string training(generator& g, int steps) {
  constexpr int layers = 40;
  trace_writer w;
  std::vector<std::uint64_t> sizes;
  for (int l = 0; l < layers; ++l) sizes.push_back(g.log_uniform(256 * 1024, 64 * mib));
  std::uint64_t total = 0;
  for (auto s : sizes) {
    (void)w.alloc(s / 4);  // weights: live to the end
    total += s;
  }
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<std::uint64_t>> saved(layers);
    for (int l = 0; l < layers; ++l) {
      std::vector<std::uint64_t> temps;
      for (auto n = g.between(0, 3); n > 0; --n)
        temps.push_back(w.alloc(sizes[l] << g.between(0, 2) >> 1));
      for (auto n = g.between(1, 3); n > 0; --n) saved[l].push_back(w.alloc(sizes[l]));
      for (auto n = g.between(0, 4); n > 0; --n) temps.push_back(w.alloc(g.between(4, 65536)));
      for (auto t : temps) w.free(t);
    }
    auto const loss = w.alloc(total / 3);
    w.free(w.alloc(total / 6));
    w.free(loss);
    std::vector<std::uint64_t> grads;
    for (int l = layers; l-- > 0;) {
      grads.push_back(w.alloc(sizes[l] / 4));
      for (auto n = g.between(1, 2); n > 0; --n) w.free(w.alloc(sizes[l] << g.between(0, 1)));
      for (auto a : saved[l]) w.free(a);
    }
    if (step == 0) {
      for (auto s : sizes) {
        (void)w.alloc(s / 4);  // optimizer state: two per weight, live to the end
        (void)w.alloc(s / 4);
      }
    }
    for (auto gr : grads) w.free(gr);
  }
  return w.text();
}

}  // namespace

allocation_trace synthetic_trace(synthetic_options const& options) {
  generator g(options.seed);
  std::string text;
  std::string name;
  if (options.shape == synthetic_shape::random_mix) {
    CUBERT_EXPECTS(options.events > 0, "synthetic_trace: events must be positive");
    text = random_mix(g, options.events);
    name = fmt::format("random_s{}", options.seed);
  } else {
    CUBERT_EXPECTS(options.steps > 0, "synthetic_trace: steps must be positive");
    text = training(g, options.steps);
    name = fmt::format("training_s{}", options.seed);
  }
  std::istringstream in(text);
  return parse_trace(in, name);
}

}  // namespace cubert::memory
