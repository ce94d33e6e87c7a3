// SPDX-License-Identifier: Apache-2.0
// What the fuzz targets share: a scratch folder of their own, and writing an input to a file
// there (the readers under test read files, as in use).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace cubert::fuzz {

/// A folder for this process's files, made once (under $TMPDIR, else /tmp).
inline std::filesystem::path scratch() {
  static std::filesystem::path const dir = [] {
    auto d = std::filesystem::temp_directory_path() /
             ("cubert-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

/// Replaces `path` (its folders made) with the input's bytes.
inline void write_input(std::filesystem::path const& path, std::uint8_t const* data,
                        std::size_t size) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<char const*>(data), static_cast<std::streamsize>(size));
}

}  // namespace cubert::fuzz
