// SPDX-License-Identifier: Apache-2.0
// `cubert tune <op>`: tunes the kernel library's operation for each problem on a device, shows
// every candidate's figures and the choice, and leaves the decision in the persistent cache (a
// second run finds it there and says so).
#include "command.hpp"
#include "op_session.hpp"
#include "search_explain.hpp"

#include <cubert/client.hpp>
#include <cubert/ops/workload.hpp>

#include <fmt/format.h>

#include <memory>
#include <optional>

namespace cubert::cli {

namespace {

void run_tune(op_options const& o) {
  op_session session(o, "tune");
  session.for_each([&o](tuned_problem& t) {
    auto& key = t.key;
    if (o.verify) {
      auto const why = t.work.verify();
      key["verified"] = !why;
      if (why) {
        key["verify_error"] = *why;
        exit_code() = 1;
      }
    }
    std::optional<tune::search_trace> trace;
    if (o.explain || !o.report.empty()) {  // The report draws the search.
      trace = t.work.tuner()->trace(t.work.key());
      if (trace) key["search"] = search_json(*trace);
    }
    if (o.json) return;
    print_key_table(key);
    if (trace && o.explain) {
      fmt::print("{}", search_text(*trace));
    } else if (o.explain) {
      fmt::print("  search: none (a list of candidates, no parameter space)\n");
    }
    if (t.cached) {
      fmt::print(
          "  every result came from the persistent cache: nothing timed (decided in {:.1f} ms; "
          "the first call took {:.1f} ms with its run)\n",
          t.decided_ms, t.first_ms);
    } else {
      auto const* file = t.work.tuner()->cache();
      fmt::print("  tuned in {:.2f} s: {} candidates timed; decision in {}\n", t.first_ms / 1e3,
                 t.timed,
                 file != nullptr ? file->path().string() : std::string("memory (cache off)"));
    }
    if (key.contains("verified")) {
      fmt::print("  output {}\n",
                 key["verified"].get<bool>()
                     ? "matches the f64 reference"
                     : "DIFFERS from the f64 reference: " + key["verify_error"].get<std::string>());
    }
    fmt::print("\n");
  });
  session.finish();
}

void setup(CLI::App& app) {
  auto opts = std::make_shared<op_options>();
  auto* cmd = app.add_subcommand(
      "tune", "Tune a kernel-library operation on a device and keep the choice in the cache");
  add_op_options(cmd, *opts);
  cmd->add_flag("--explain", opts->explain,
                "Show how each parameter space was searched (the JSON holds every step)");
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
