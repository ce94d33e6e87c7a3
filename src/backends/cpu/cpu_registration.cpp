// SPDX-License-Identifier: Apache-2.0
// The CPU backend's registration: its public entry points and the registry's entry.
#include "channel/channel.hpp"
#include "cpu_server.hpp"
#include "device/backend_entry.hpp"

#include <cubert/client.hpp>
#include <cubert/cpu.hpp>
#include <cubert/error.hpp>

#include <memory>
#include <string>

namespace cubert::cpu {

std::unique_ptr<backend::server> make_server(options const& opts) {
  return std::make_unique<cpu_server>(opts);
}

client make_client(options const& opts, channel_kind channel) {
  return client(backend::make_channel(make_server(opts), channel));
}

}  // namespace cubert::cpu

namespace cubert::backend {

backend_entry const& cpu_entry() {
  static backend_entry const entry{
      "cpu",
      "CPU",
      true,
      []() noexcept { return 1; },
      [] { return std::string{}; },
      [](int) { return cpu::make_properties(0); },
      [](int, client_options const& o) {
        cpu::options opts;
        opts.threads = o.threads;
        opts.memory = o.memory;
        return cpu::make_server(opts);
      },
  };
  return entry;
}

}  // namespace cubert::backend
