// SPDX-License-Identifier: Apache-2.0
// The flow `cubert tune` and `cubert bench` share: refuse bad input before touching a device or
// a cache, then per problem tune (or find in the cache) and describe it, then write the document.
#pragma once

#include "op_options.hpp"
#include "progress_bar.hpp"

#include <cubert/client.hpp>
#include <cubert/ops/ceilings.hpp>
#include <cubert/ops/workload.hpp>

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace cubert::cli {

/// One problem after its tuning: the workload, its key of the document, how it went.
struct tuned_problem {
  ops::workload& work;
  nlohmann::json& key;    ///< key_json's, with "decided_ms"; the command adds to it.
  bool cached = false;    ///< Every result came from the persistent cache.
  double first_ms = 0;    ///< The first run, its tuning included.
  double decided_ms = 0;  ///< What the choice took (the cache's answer included).
  std::size_t timed = 0;  ///< Candidates benchmarked for it.
};

/// Validates `o` (throws before any device or cache is touched), configures the library's
/// tuning with a progress bar, opens the device and starts the document of `command`.
class op_session {
 public:
  op_session(op_options const& o, std::string command);

  /// For each problem: makes its workload, runs it through the tuner, builds its key, then
  /// calls `each` (which may print and add to the key) and appends the key to the document.
  void for_each(std::function<void(tuned_problem&)> const& each);
  /// Adds the device (with its ceilings) and writes the document (--json, --report).
  void finish();

  [[nodiscard]] client& device() noexcept { return client_; }

 private:
  op_options const& options_;
  std::vector<ops::problem> problems_;
  progress_bar bar_{false};
  double decided_ms_ = 0;  // What the last choice took, the cache's answer included.
  client client_;
  nlohmann::json doc_;
  std::optional<ops::device_ceilings> ceilings_;
};

}  // namespace cubert::cli
