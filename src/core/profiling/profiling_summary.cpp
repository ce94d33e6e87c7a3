// SPDX-License-Identifier: Apache-2.0
#include <cubert/profiling_summary.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>
#include <utility>

namespace cubert::profiling {

void profiling_summary::record(std::string_view name, profile_duration duration) {
  auto const eol = name.find('\n');
  std::vector<entry> to_fold;
  {
    std::lock_guard lock(mutex_);
    pending_.push_back({std::string(name.substr(0, eol)), std::move(duration)});
    if (pending_.size() < fold_at) return;
    to_fold.swap(pending_);
    ++folding_;
  }
  // While they resolve, these measurements are neither pending nor folded: the readers and
  // reset() wait for them (else a reset was undone, and a table missed them).
  struct fold_done {
    profiling_summary& s;
    ~fold_done() {
      std::lock_guard lock(s.mutex_);
      --s.folding_;
      s.folded_cv_.notify_all();
    }
  };
  fold_done const done{*this};
  totals resolved;
  resolved.add(to_fold);  // Outside the lock: device durations may wait.
  std::lock_guard lock(mutex_);
  folded_.merge(std::move(resolved));
}

std::unique_lock<std::mutex> profiling_summary::settled_lock() const {
  std::unique_lock lock(mutex_);
  folded_cv_.wait(lock, [&] { return folding_ == 0; });
  return lock;
}

void profiling_summary::record(std::string_view name, std::chrono::nanoseconds duration) {
  auto const now = profile_clock::now();
  record(name, profile_duration::from_system(now - duration, now));
}

bool profiling_summary::empty() const {
  auto const lock = settled_lock();
  return pending_.empty() && folded_.rows.empty() && folded_.failed == 0;
}

std::size_t profiling_summary::unresolved() const {
  std::lock_guard lock(mutex_);
  return pending_.size();
}

void profiling_summary::reset() {
  auto const lock = settled_lock();
  pending_.clear();
  folded_ = totals{};
}

void profiling_summary::totals::add(std::vector<entry> const& entries) {
  for (auto const& e : entries) {
    std::chrono::nanoseconds d{0};
    try {
      d = e.duration.resolve();
    } catch (std::exception const& x) {
      if (failed++ == 0) first_failure = fmt::format("{}: {}", e.name, x.what());
      continue;
    }
    auto& r = rows[e.name];
    r.total += d;
    ++r.count;
  }
}

void profiling_summary::totals::merge(totals&& other) {
  for (auto& [name, r] : other.rows) {
    auto& mine = rows[name];
    mine.total += r.total;
    mine.count += r.count;
  }
  if (failed == 0) first_failure = std::move(other.first_failure);
  failed += other.failed;
}

namespace {

// Three significant digits. "{:.3}" writes them in exponent form from 1000 on ("1e+03ms" for
// 999.9996 ms, "1.23e+03s" for a 20-minute total), so a value that rounds to 1000 of a unit
// takes the next one, and seconds, the last unit, are written whole from 1000 on.
std::string format_ns(std::chrono::nanoseconds d) {
  auto const ns = static_cast<double>(d.count());
  auto const size = std::abs(ns);
  if (size >= 999.5e9) return fmt::format("{:.0f}s", ns / 1e9);
  if (size >= 999.5e6) return fmt::format("{:.3}s", ns / 1e9);
  if (size >= 999.5e3) return fmt::format("{:.3}ms", ns / 1e6);
  if (size >= 1e3) return fmt::format("{:.3}µs", ns / 1e3);
  return fmt::format("{}ns", d.count());
}

}  // namespace

std::string profiling_summary::table() const {
  std::vector<entry> pending;
  totals t;
  {
    auto const lock = settled_lock();
    pending = pending_;
    t = folded_;
  }
  t.add(pending);
  return format(t);
}

std::string profiling_summary::take_table() {
  std::vector<entry> pending;
  totals t;
  {
    auto const lock = settled_lock();
    pending.swap(pending_);
    std::swap(t, folded_);
  }
  t.add(pending);
  return format(t);
}

std::string profiling_summary::format(totals const& t) {
  if (t.rows.empty() && t.failed == 0) return {};
  struct named_row {
    std::string name;
    std::chrono::nanoseconds total{0};
    std::uint64_t count = 0;
  };
  std::vector<named_row> sorted;
  std::chrono::nanoseconds total{0};
  std::uint64_t count = 0;
  for (auto const& [name, r] : t.rows) {
    total += r.total;
    count += r.count;
    sorted.push_back({name, r.total, r.count});
  }
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](named_row const& a, named_row const& b) { return a.total > b.total; });
  std::size_t width = 5;
  for (auto const& r : sorted) width = std::max(width, r.name.size());
  // cubecl divides whole microseconds, which rounds every row of a table under 1 µs to 100%
  // and short rows to 0%; nanoseconds (in long double: 100× may pass 2^63) keep the shares.
  // Rows that all took no time (zero-cube launches timed by events) share by count.
  auto const ratio = [&](named_row const& r) {
    auto const [part, whole] =
        total.count() == 0 ? std::pair<long double, long double>(r.count, count)
                           : std::pair<long double, long double>(r.total.count(), total.count());
    return static_cast<std::int64_t>(100.0L * part / whole);
  };
  std::string out = fmt::format("| {:<{}} | {:<12} | {:<12} | {:<5} |\n", "Name", width, "Duration",
                                "Num Computed", "Ratio");
  out += fmt::format("|{:-<{}}|{:-<14}|{:-<14}|{:-<7}|\n", "", width + 2, "", "", "");
  for (auto const& r : sorted) {
    out += fmt::format("| {:<{}} | {:<12} | {:<12} | {:>4}% |\n", r.name, width, format_ns(r.total),
                       r.count, ratio(r));
  }
  out += fmt::format("| {:<{}} | {:<12} | {:<12} | {:>4}% |\n", "Total", width, format_ns(total),
                     count, 100);
  if (t.failed != 0) {
    out += fmt::format("{} measurement(s) could not be resolved and are left out (first: {})\n",
                       t.failed, t.first_failure);
  }
  return out;
}

}  // namespace cubert::profiling
