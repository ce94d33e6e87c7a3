// SPDX-License-Identifier: Apache-2.0
// The null backend's entry points: what include/cubert/<b>.hpp declares for a user-facing backend.
#pragma once

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/memory/configuration.hpp>

#include <memory>

namespace cubert::null {

/// What a null device may be given. Its capacity is fixed, so that tests of the pools and of
/// out-of-memory paths see the same device on every host.
struct options {
  /// cubecl's default pools, as its dummy server has.
  memory::memory_configuration memory = memory::memory_configuration::sub_slices();
};

/// The null device's properties: one device, 512 MiB, 32-byte alignment, host-clock timing.
[[nodiscard]] device_properties make_properties();

/// A new server of the null device. Never throws for want of a driver: there is none.
[[nodiscard]] std::unique_ptr<backend::server> make_server(options const& opts = {});

/// A client of its own over a new null server, through a channel of `kind`.
[[nodiscard]] client make_client(options const& opts = {}, channel_kind kind = channel_kind::mutex);

}  // namespace cubert::null

namespace cubert::backend {
struct backend_entry;
/// The entry a registered backend gives the device registry (src/core/device/backend_entry.hpp).
[[nodiscard]] backend_entry const& null_entry();
}  // namespace cubert::backend
