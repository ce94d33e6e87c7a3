// SPDX-License-Identifier: Apache-2.0
// A scratch directory removed with everything in it when the test ends.
#pragma once

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <string_view>

namespace cubert::test {

class temp_dir {
 public:
  explicit temp_dir(std::string_view prefix = "cubert-test-") {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            (std::string(prefix) + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(temp_dir const&) = delete;
  temp_dir& operator=(temp_dir const&) = delete;

  [[nodiscard]] std::filesystem::path const& path() const { return path_; }

  /// Writes `text` to `name` under the directory, creating its parents; returns its canonical
  /// path.
  std::filesystem::path write(std::filesystem::path const& name, std::string const& text) const {
    auto const p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
    return std::filesystem::canonical(p);
  }

 private:
  std::filesystem::path path_;
};

}  // namespace cubert::test
