// SPDX-License-Identifier: Apache-2.0
// The null backend's registration: its entry points and its entry for the device registry.
// The build does not register it (see CMakeLists.txt); its entry is what a registered backend
// gives, and the tests check it as the registry would use it.
#include "channel/channel.hpp"
#include "device/backend_entry.hpp"
#include "null_backend.hpp"
#include "null_device.hpp"
#include "null_server.hpp"

namespace cubert::null {

std::unique_ptr<backend::server> make_server(options const& opts) {
  return std::make_unique<null_server>(opts);
}

client make_client(options const& opts, channel_kind kind) {
  return client(backend::make_channel(make_server(opts), kind));
}

}  // namespace cubert::null

namespace cubert::backend {

backend_entry const& null_entry() {
  static backend_entry const entry{
      "null",
      "null",
      true,
      []() noexcept { return 1; },
      [] { return std::string{}; },
      [](int) { return null::make_properties(); },
      [](int, client_options const&) { return null::make_server(); },
  };
  return entry;
}

}  // namespace cubert::backend
