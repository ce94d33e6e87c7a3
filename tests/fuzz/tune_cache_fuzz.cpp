// SPDX-License-Identifier: Apache-2.0
// The tune cache's reader on any file: it loads what is intact, skips the rest, and answers
// lookups; it never crashes, leaks or throws for what a file holds.
#include "fuzz_files.hpp"

#include <cubert/tune/tune_cache.hpp>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  auto const root = cubert::fuzz::scratch() / "tune";
  auto const file = cubert::tune::tune_cache::file_for(root, "fuzz", "fuzz device");
  cubert::fuzz::write_input(file, data, size);
  cubert::tune::tune_cache cache(root, "fuzz", "fuzz device");
  (void)cache.find("k", "c", "");
  (void)cache.find_verdict("k", "c", "", "", "r");
  (void)cache.find_decision("k", "x");
  (void)cache.skipped_lines();
  cache.refresh();  // A second read of the same bytes (the cursor and tail checks).
  return 0;
}
