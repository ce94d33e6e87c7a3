// SPDX-License-Identifier: Apache-2.0
// The progress of a tuning on standard error: a bar redrawn in place on a terminal, a plain line
// per candidate otherwise (logs, pipes, CI).
#pragma once

#include <cubert/tune/benchmark.hpp>

#include <chrono>
#include <string>

namespace cubert::cli {

/// Turns a tuner's progress reports into a display. One tuning at a time.
class progress_bar {
 public:
  /// `quiet`: show nothing (--json to a terminal keeps stdout clean either way: this writes to
  /// standard error).
  explicit progress_bar(bool quiet);
  ~progress_bar();
  progress_bar(progress_bar const&) = delete;
  progress_bar& operator=(progress_bar const&) = delete;

  /// What the tuner calls.
  void operator()(tune::tune_progress const& p);
  /// Clears the bar before other output is printed.
  void clear();

 private:
  bool quiet_;
  bool terminal_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace cubert::cli
