// SPDX-License-Identifier: Apache-2.0
// `cubert cache import` on any bundle: a bad one is refused whole with a typed error, a good one
// merged; nothing crashes or leaks.
#include "fuzz_files.hpp"

#include <cubert/error.hpp>
#include <cubert/tune/tune_cache_store.hpp>

#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  auto const root = cubert::fuzz::scratch() / "bundle";
  std::filesystem::remove_all(root);
  try {
    (void)cubert::tune::import_cache(
        root, std::string_view(reinterpret_cast<char const*>(data), size));
    (void)cubert::tune::export_cache(root);
  } catch (cubert::error const&) {  // Refused with its reason: what a bad bundle must get.
  }
  return 0;
}
