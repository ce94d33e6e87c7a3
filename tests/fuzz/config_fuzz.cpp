// SPDX-License-Identifier: Apache-2.0
// The `cubert.toml` reader on any file: a configuration, or a typed error naming the line.
#include "fuzz_files.hpp"

#include <cubert/config.hpp>
#include <cubert/error.hpp>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  auto const file = cubert::fuzz::scratch() / "cubert.toml";
  cubert::fuzz::write_input(file, data, size);
  try {
    (void)cubert::config::from_file(file);
  } catch (cubert::error const&) {  // config_error, io_error: what bad input must get.
  }
  return 0;
}
