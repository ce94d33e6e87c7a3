// SPDX-License-Identifier: Apache-2.0
// `cubert tune <op>`: tunes the kernel library's operation for each problem on a device, shows
// every candidate's figures and the choice, and leaves the decision in the persistent cache (a
// second run finds it there and says so).
#include "command.hpp"
#include "op_options.hpp"
#include "progress_bar.hpp"

#include <cubert/build_config.hpp>
#include <cubert/client.hpp>
#include <cubert/ops/ceilings.hpp>
#include <cubert/ops/tuning.hpp>
#include <cubert/ops/workload.hpp>

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <optional>

namespace cubert::cli {

namespace {

void run_tune(op_options const& o) {
  // Everything the command line can get wrong is refused before a device or a cache is touched.
  auto const problems = problems_of(o);
  for (auto const& p : problems) ops::workload::validate(p);
  (void)parse_budget(o.budget);
  progress_bar bar(false);
  double decided_ms = 0;  // What the last choice took, the cache's answer included.
  configure_tuning(o, [&bar, &decided_ms](tune::tune_progress const& p) {
    if (p.what == tune::tune_progress::stage::finished) {
      decided_ms = std::chrono::duration<double, std::milli>(p.elapsed).count();
    }
    bar(p);
  });
  auto c = make_client(o.device);
  nlohmann::json doc{{"command", "tune"},
                     {"argv", o.argv},
                     {"cubert_version", CUBERT_VERSION_STRING},
                     {"date", utc_now()},
                     {"keys", nlohmann::json::array()}};
  std::optional<ops::device_ceilings> ceil;
  for (auto const& p : problems) {
    ops::workload w(c, p);
    auto const tuner = w.tuner();
    auto const before = tuner->benchmarked();
    decided_ms = 0;
    auto const start = std::chrono::steady_clock::now();
    w.run();
    c.sync();
    double const ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    bar.clear();
    bool const cached = tuner->benchmarked() == before;
    if (!ceil) ceil = ops::ceilings(c);
    auto key = key_json(w, *ceil, cached, ms);
    key["decided_ms"] = decided_ms;
    if (o.verify) {
      auto const why = w.verify();
      key["verified"] = !why;
      if (why) {
        key["verify_error"] = *why;
        exit_code() = 1;
      }
    }
    if (!o.json) {
      print_key_table(key);
      auto const* file = tuner->cache();
      if (cached) {
        fmt::print(
            "  every result came from the persistent cache: nothing timed (decided in {:.1f} ms; "
            "the first call took {:.1f} ms with its run)\n",
            decided_ms, ms);
      } else {
        fmt::print("  tuned in {:.2f} s: {} candidates timed; decision in {}\n", ms / 1e3,
                   tuner->benchmarked() - before,
                   file != nullptr ? file->path().string() : std::string("memory (cache off)"));
      }
      if (key.contains("verified")) {
        fmt::print("  output {}\n", key["verified"].get<bool>()
                                        ? "matches the f64 reference"
                                        : "DIFFERS from the f64 reference: " +
                                              key["verify_error"].get<std::string>());
      }
      fmt::print("\n");
    }
    doc["keys"].push_back(std::move(key));
  }
  if (!ceil) ceil = ops::ceilings(c);
  doc["device"] = device_json(c, *ceil);
  emit(o, doc);
}

void setup(CLI::App& app) {
  auto opts = std::make_shared<op_options>();
  auto* cmd = app.add_subcommand(
      "tune", "Tune a kernel-library operation on a device and keep the choice in the cache");
  add_op_options(cmd, *opts);
  cmd->add_flag("--no-checks", opts->no_checks,
                "Do not compare each candidate's output with the first candidate's");
  cmd->callback([opts] {
    opts->argv = command_line();
    run_tune(*opts);
  });
}

command_registrar const reg{"tune", setup};

}  // namespace

}  // namespace cubert::cli
