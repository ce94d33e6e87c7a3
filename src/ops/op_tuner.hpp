// SPDX-License-Identifier: Apache-2.0
// The tuner of one operation family, made again when `ops::configure` changes the settings.
#pragma once

#include <cubert/client.hpp>
#include <cubert/ops/tuning.hpp>
#include <cubert/tune/local_tuner.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace cubert::ops::detail {

/// Bumped by every `configure`: a family whose tuner is older makes a new one.
[[nodiscard]] std::uint64_t settings_generation() noexcept;

/// The device a tuner serves: "cpu:0", "cuda:0", "opencl:1".
[[nodiscard]] std::string device_key(client const& c);

/// One family's tuner (`ops.<family>` in the persistent cache), per settings generation.
/// Thread-safe. A caller holds the shared_ptr it got for the whole call, so a `configure` in
/// the middle never destroys a tuner in use.
class op_tuner {
 public:
  using tuner_type = tune::local_tuner<tune_key>;

  explicit op_tuner(std::string name) : name_(std::move(name)) {}

  /// The tuner for the current settings.
  [[nodiscard]] std::shared_ptr<tuner_type> get() {
    auto const gen = settings_generation();
    std::lock_guard lock(mutex_);
    if (!current_ || generation_ != gen) {
      current_ = std::make_shared<tuner_type>(name_, current_settings().tuner);
      generation_ = gen;
    }
    return current_;
  }

  [[nodiscard]] std::string const& name() const noexcept { return name_; }

 private:
  std::string name_;
  std::mutex mutex_;
  std::shared_ptr<tuner_type> current_;
  std::uint64_t generation_ = 0;
};

}  // namespace cubert::ops::detail
