// SPDX-License-Identifier: Apache-2.0
// `cubert devices`: the devices this build can use, with their main properties.
#include "command.hpp"

#include <cubert/client.hpp>
#include <cubert/memory/memory_usage.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>

namespace {

struct devices_options {
  bool json = false;
};

void run_devices(devices_options const& opts) {
  auto const list = cubert::devices();
  if (opts.json) {
    auto out = nlohmann::json::array();
    for (auto const& d : list) {
      auto const& p = d.properties;
      out.push_back({{"id", d.id},
                     {"backend", d.backend},
                     {"name", d.name},
                     {"processor", std::string(cubert::to_string(p.hardware.processor))},
                     {"architecture", p.architecture},
                     {"compute_units", p.hardware.num_compute_units},
                     {"total_memory", p.total_memory},
                     {"max_shared_memory", p.hardware.max_shared_memory_size},
                     {"plane_size", p.hardware.plane_size_max},
                     {"tensor_maps", p.hardware.tensor_maps},
                     {"max_cluster_size", p.hardware.max_cluster_size},
                     {"cooperative_launch", p.hardware.cooperative_launch},
                     {"driver", p.driver_version},
                     {"compiler", p.compiler},
                     {"timing", std::string(cubert::to_string(p.timing))},
                     {"fingerprint", p.fingerprint()}});
    }
    std::cout << out.dump(2) << "\n";
    return;
  }
  fmt::print("{:<8} {:<8} {:<6} {:<12} {:<8} {:<4} {:<8} {}\n", "ID", "BACKEND", "UNITS", "MEMORY",
             "TIMING", "TMA", "CLUSTER", "NAME");
  for (auto const& d : list) {
    auto const& p = d.properties;
    fmt::print("{:<8} {:<8} {:<6} {:<12} {:<8} {:<4} {:<8} {}\n", d.id, d.backend,
               p.hardware.num_compute_units, cubert::memory::format_bytes(p.total_memory),
               cubert::to_string(p.timing), p.hardware.tensor_maps ? "yes" : "no",
               p.hardware.max_cluster_size, d.name);
  }
  // Why a device one expected is missing, without having to try a client.
  for (auto const& b : cubert::backends()) {
    if (b.device_count == 0) fmt::print("{}: no device: {}\n", b.name, b.note);
  }
}

void setup(CLI::App& app) {
  auto opts = std::make_shared<devices_options>();
  auto* cmd = app.add_subcommand("devices", "List the devices this build of cubert can use");
  cmd->add_flag("--json", opts->json, "Print JSON instead of a table");
  cmd->callback([opts] { run_devices(*opts); });
}

cubert::cli::command_registrar const reg{"devices", setup};

}  // namespace
