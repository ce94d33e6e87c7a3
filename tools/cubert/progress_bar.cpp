// SPDX-License-Identifier: Apache-2.0
// Draws a tuning's progress on standard error.
#include "progress_bar.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <unistd.h>

namespace cubert::cli {

progress_bar::progress_bar(bool quiet) : quiet_(quiet), terminal_(isatty(STDERR_FILENO) == 1) {}

progress_bar::~progress_bar() {
  clear();
}

void progress_bar::clear() {
  if (!drawn_) return;
  fmt::print(stderr, "\r\033[2K");
  std::fflush(stderr);
  drawn_ = false;
}

void progress_bar::operator()(tune::tune_progress const& p) {
  if (quiet_) return;
  using stage = tune::tune_progress::stage;
  if (!terminal_) {
    // One line per candidate started, and one for the choice: enough to follow a long run.
    if (p.what == stage::warm_up) {
      fmt::print(stderr, "tuning {}: candidate {}/{} {}\n", p.key, p.position, p.total,
                 p.candidate);
    } else if (p.what == stage::finished) {
      fmt::print(stderr, "tuning {}: chose {}\n", p.key, p.candidate);
    }
    return;
  }
  auto const now = std::chrono::steady_clock::now();
  // Redrawn at most 20 times a second, and always for a new candidate or the end.
  if (p.what == stage::sampling && now - last_ < std::chrono::milliseconds(50)) return;
  last_ = now;
  if (p.what == stage::finished) {
    clear();
    return;
  }
  constexpr int width = 30;
  // Warm-ups are the first half of the work, sampling rounds the second.
  double const done = p.total == 0 ? 0
                      : p.what == stage::warm_up
                          ? 0.5 * static_cast<double>(p.position - 1) / static_cast<double>(p.total)
                          : 0.5 + 0.5 * p.round / std::max(1, p.rounds);
  int const filled = static_cast<int>(done * width);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(width, '.');
  auto const what = p.what == stage::warm_up
                        ? fmt::format("{}/{} {}", p.position, p.total, p.candidate)
                        : fmt::format("timing, round {}/{}", p.round, p.rounds);
  fmt::print(stderr, "\r\033[2K[{}] {:.60}", bar, what);
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace cubert::cli
