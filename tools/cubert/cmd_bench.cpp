// SPDX-License-Identifier: Apache-2.0
// `cubert bench <op>`: runs the tuned choice of the kernel library for each problem and, in the
// same run, the peer library where one is present, and prints the ratio of their speeds.
#include "command.hpp"
#include "op_session.hpp"
#include "peers.hpp"

#include <cubert/build_config.hpp>
#include <cubert/client.hpp>
#include <cubert/ops/ceilings.hpp>
#include <cubert/ops/workload.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <vector>

namespace cubert::cli {

namespace {

struct bench_options : op_options {
  unsigned repeat = 20;
};

// The median of `repeat` device-timed runs of `run` (after one untimed run).
template <typename Run>
double median_ns(client const& c, Run const& run, unsigned repeat) {
  run();
  std::vector<double> t;
  for (unsigned r = 0; r < repeat; ++r) {
    auto const d = c.profile(run, "bench");
    t.push_back(static_cast<double>(d.resolve().count()));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::string rate(double flops, double bytes, double ns, bool by_flops) {
  return by_flops ? fmt::format("{:.1f} GFLOP/s", flops / ns)
                  : fmt::format("{:.1f} GB/s", bytes / ns);
}

void run_bench(bench_options const& o) {
  op_session session(o, "bench");
  auto& c = session.device();
  session.for_each([&](tuned_problem& t) {
    auto& w = t.work;
    auto& key = t.key;
    auto const& p = w.spec();
    auto const tuner = w.tuner();
    bool const cached = t.cached;
    double const ms = t.first_ms;
    double const ours = median_ns(
        c, [&] { w.run(); }, o.repeat);
    auto const winner = tuner->fastest(w.key());
    std::string const chosen = winner ? w.name_of(*winner) : std::string("?");
    bool const by_flops = p.op == "matmul";
    key["chosen"] = {{"name", chosen},
                     {"median_ns", ours},
                     {"gflops", w.flops() / ours},
                     {"gbs", w.bytes() / ours}};
    std::string why;
    // The vendor library of the device is the peer where the library has one (cuBLAS on CUDA),
    // run through the same client on the same operands; otherwise another library's own run.
    std::optional<peer_timing> peer;
    if (!w.vendor().empty()) {
      peer = peer_timing{w.vendor(), median_ns(
                                         c, [&] { w.run_vendor(); }, o.repeat)};
    } else {
      peer = time_peer(c, p, static_cast<int>(o.repeat), why);
    }
    if (!o.json) {
      fmt::print("{}  on {}\n", p.describe(), c.properties().name);
      fmt::print("  cubert   {:>10.3f} ms  {:>16}  ({}{})\n", ours / 1e6,
                 rate(w.flops(), w.bytes(), ours, by_flops), chosen,
                 cached ? ", from the cache" : fmt::format(", tuned in {:.2f} s", ms / 1e3));
    }
    if (peer) {
      key["peer"] = {{"name", peer->name},
                     {"median_ns", peer->median_ns},
                     {"gflops", w.flops() / peer->median_ns},
                     {"gbs", w.bytes() / peer->median_ns}};
      key["ratio"] = peer->median_ns / ours;
      if (!o.json) {
        fmt::print("  peer     {:>10.3f} ms  {:>16}  ({})\n", peer->median_ns / 1e6,
                   rate(w.flops(), w.bytes(), peer->median_ns, by_flops), peer->name);
        fmt::print("  ratio    {:.3f}× the peer's speed\n\n", peer->median_ns / ours);
      }
    } else {
      key["peer_missing"] = why;
      if (!o.json) fmt::print("  peer     none: {}\n\n", why);
    }
  });
  session.finish();
}

void setup(CLI::App& app) {
  auto opts = std::make_shared<bench_options>();
  auto* cmd = app.add_subcommand(
      "bench", "Run a kernel-library operation's tuned choice beside the peer library");
  add_op_options(cmd, *opts);
  cmd->add_option("--repeat", opts->repeat, "Timed runs of each (the median is reported)")
      ->check(decimal())
      ->check(CLI::Range(1u, 100000u))
      ->capture_default_str();
  cmd->callback([opts] {
    opts->argv = command_line();
    run_bench(*opts);
  });
}

command_registrar const reg{"bench", setup};

}  // namespace

}  // namespace cubert::cli
