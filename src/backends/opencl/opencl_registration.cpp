// SPDX-License-Identifier: Apache-2.0
// The OpenCL backend's registration: its public entry points (include/cubert/opencl.hpp).
#include "channel/channel.hpp"
#include "device/backend_entry.hpp"
#include "opencl_device.hpp"
#include "opencl_server.hpp"

#include <cubert/client.hpp>
#include <cubert/opencl.hpp>

namespace cubert::opencl {

int device_count() noexcept {
  try {
    return static_cast<int>(detail::device_list().size());
  } catch (...) {
    return 0;  // Only a host out of memory at the first listing gets here.
  }
}

std::string unavailable_reason() {
  return detail::device_list().empty() ? detail::listing_failure() : std::string{};
}

device_properties make_properties(int ordinal) {
  return detail::make_device_properties(detail::device_at(ordinal), ordinal);
}

std::unique_ptr<backend::server> make_server(int ordinal, options const& opts) {
  return std::make_unique<detail::opencl_server>(ordinal, opts);
}

client make_client(int ordinal, options const& opts, channel_kind channel) {
  return client(backend::make_channel(make_server(ordinal, opts), channel));
}

}  // namespace cubert::opencl

namespace cubert::backend {

backend_entry const& opencl_entry() {
  static backend_entry const entry{
      "opencl",
      "OpenCL",
      false,
      &opencl::device_count,
      &opencl::unavailable_reason,
      &opencl::make_properties,
      [](int ordinal, client_options const& o) {
        opencl::options opts;
        opts.memory = o.memory;
        return opencl::make_server(ordinal, opts);
      },
  };
  return entry;
}

}  // namespace cubert::backend
