// SPDX-License-Identifier: Apache-2.0
#include "null_queue.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

namespace cubert::null {

void null_queue::run(kernel const& k, cpu::kernel_context base,
                     std::array<std::uint32_t, 3> counts) {
  auto const& body = *k.cpu();
  base.cube_count = {counts[0], counts[1], counts[2]};
  backend::kernel_body_scope const inside;  // A body calling back into its client is refused.
  try {
    for (std::uint32_t z = 0; z < counts[2]; ++z) {
      for (std::uint32_t y = 0; y < counts[1]; ++y) {
        for (std::uint32_t x = 0; x < counts[0]; ++x) {
          base.cube_pos = {x, y, z};
          body(base);
        }
      }
    }
  } catch (std::exception const& e) {
    failed(k, e.what());
  } catch (...) {
    failed(k, "a non-standard exception");
  }
}

void null_queue::failed(kernel const& k, std::string const& why) {
  auto message = fmt::format("kernel '{}' failed: {}", k.name(), why);
  profiler_.error(message);
  errors_.record(std::make_exception_ptr(launch_error(std::move(message))));
}

}  // namespace cubert::null
