// SPDX-License-Identifier: Apache-2.0
#include "trace_replay.hpp"

#include "counting_storage.hpp"

#include <cubert/error.hpp>
#include <cubert/memory/host_storage.hpp>
#include <cubert/memory/memory_manager.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <istream>
#include <iterator>
#include <limits>
#include <sys/wait.h>
#include <unordered_map>
#include <vector>

namespace cubert::memory {

namespace {

std::string_view next_field(std::string_view& line) {
  auto const start = line.find_first_not_of(" \t\r");
  if (start == std::string_view::npos) {
    line = {};
    return {};
  }
  line.remove_prefix(start);
  auto const end = std::min(line.find_first_of(" \t\r"), line.size());
  auto const field = line.substr(0, end);
  line.remove_prefix(end);
  return field;
}

std::uint64_t parse_number(std::string_view field, std::string_view what, std::size_t line_no,
                           std::string const& name) {
  std::uint64_t value = 0;
  auto const [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (ec == std::errc::result_out_of_range && ptr == field.data() + field.size()) {
    throw invalid_argument(fmt::format("{}:{}: {} {} does not fit in 64 bits (at most {})", name,
                                       line_no, what, field,
                                       std::numeric_limits<std::uint64_t>::max()));
  }
  if (field.empty() || ec != std::errc{} || ptr != field.data() + field.size()) {
    throw invalid_argument(fmt::format("{}:{}: expected a non-negative integer {}, got '{}'", name,
                                       line_no, what, field));
  }
  return value;
}

// `source` names the input in error messages: the file's path, where the trace's name drops
// its directory and suffix.
allocation_trace parse_text(std::string_view text, std::string name, std::string const& source) {
  allocation_trace t;
  t.name = std::move(name);
  std::unordered_map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>>
      live;  // id -> slot, size
  std::uint64_t live_bytes = 0;
  std::size_t line_no = 0;
  while (!text.empty()) {
    auto const eol = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(std::min(eol + 1, text.size()));
    ++line_no;
    auto const op = next_field(line);
    if (op.empty() || op.front() == '#') continue;
    trace_event e;
    if (op == "a") {
      e.alloc = true;
      e.id = parse_number(next_field(line), "id", line_no, source);
      e.size = parse_number(next_field(line), "size", line_no, source);
      e.slot = t.allocations++;
      if (!live.emplace(e.id, std::pair{e.slot, e.size}).second) {
        throw invalid_argument(
            fmt::format("{}:{}: allocation id {} is already live", source, line_no, e.id));
      }
      if (e.size > std::numeric_limits<std::uint64_t>::max() - live_bytes) {
        // The peak and every ratio built on it would wrap to a wrong, small figure.
        throw invalid_argument(
            fmt::format("{}:{}: allocation id {} of {} bytes takes the live bytes past 2^64 - 1",
                        source, line_no, e.id, e.size));
      }
      live_bytes += e.size;
      t.peak_live_bytes = std::max(t.peak_live_bytes, live_bytes);
      t.largest_request = std::max(t.largest_request, e.size);
    } else if (op == "f") {
      e.alloc = false;
      e.id = parse_number(next_field(line), "id", line_no, source);
      auto it = live.find(e.id);
      if (it == live.end()) {
        throw invalid_argument(
            fmt::format("{}:{}: free of id {}, which is not live", source, line_no, e.id));
      }
      e.slot = it->second.first;
      e.size = it->second.second;
      live_bytes -= e.size;
      live.erase(it);
    } else {
      throw invalid_argument(fmt::format(
          "{}:{}: unknown event '{}' (expected 'a ID SIZE' or 'f ID')", source, line_no, op));
    }
    if (!next_field(line).empty()) {
      throw invalid_argument(fmt::format("{}:{}: trailing fields", source, line_no));
    }
    t.events.push_back(e);
  }
  t.never_freed = live.size();
  return t;
}

// Nothing held and nothing reserved is 1; memory reserved for a trace that never holds a byte
// (zero-size requests) is no ratio at all, not a perfect one.
double reserved_over_live(std::uint64_t reserved, std::uint64_t live) {
  if (live == 0) return reserved == 0 ? 1.0 : std::numeric_limits<double>::infinity();
  return static_cast<double>(reserved) / static_cast<double>(live);
}

std::string read_gzip(std::filesystem::path const& path) {
  // Single quotes keep the shell from interpreting anything in the path.
  std::string quoted = "'";
  for (char c : path.string()) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  std::string const cmd = "gzip -dc -- " + quoted + " 2>/dev/null";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) throw io_error(fmt::format("cannot run gzip to read {}", path.string()));
  std::string out;
  char buf[1 << 16];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  int const status = ::pclose(pipe);
  if (status != 0) {
    // The shell's 127: no gzip at all, which "missing or corrupt" blamed on a good file.
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
      throw io_error(fmt::format("cannot read {}: no gzip program found on PATH to decompress it",
                                 path.string()));
    }
    throw io_error(
        fmt::format("gzip could not decompress {} (missing or corrupt; gzip exit status "
                    "{})",
                    path.string(), WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  }
  return out;
}

}  // namespace

allocation_trace parse_trace(std::istream& in, std::string name) {
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  auto const source = name;
  return parse_text(text, std::move(name), source);
}

allocation_trace load_trace(std::filesystem::path const& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw io_error(fmt::format("trace file {} does not exist or is not a file", path.string()));
  }
  auto name = path.filename().string();
  for (std::string_view suffix : {".gz", ".trace"}) {
    if (name.ends_with(suffix)) name.resize(name.size() - suffix.size());
  }
  if (path.extension() == ".gz") return parse_text(read_gzip(path), name, path.string());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw io_error(fmt::format("cannot open trace file {}", path.string()));
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return parse_text(text, name, path.string());
}

namespace {

// A trace built in code rather than parsed skipped parse_trace's checks; an event whose slot is
// past `allocations` would write past the replay's table, and a wrong peak would misstate the
// ratio. Checked once, before any timed pass, and before scaling.
void check_trace(allocation_trace const& trace) {
  std::vector<std::uint64_t> live_size(trace.allocations, 0);
  std::vector<bool> live(trace.allocations, false);
  std::uint64_t live_bytes = 0;
  std::uint64_t peak = 0;
  auto const refuse = [&](std::size_t index, std::string_view why) {
    throw invalid_argument(fmt::format("trace {}: event {} of {} (id {}): {}", trace.name,
                                       index + 1, trace.events.size(), trace.events[index].id,
                                       why));
  };
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    auto const& e = trace.events[i];
    if (e.slot >= trace.allocations) {
      refuse(i, fmt::format("slot {} is not below the trace's {} allocations", e.slot,
                            trace.allocations));
    }
    if (e.alloc) {
      if (live[e.slot]) refuse(i, fmt::format("slot {} is allocated while live", e.slot));
      if (e.size > std::numeric_limits<std::uint64_t>::max() - live_bytes) {
        refuse(i, "live bytes pass 2^64 - 1");
      }
      live[e.slot] = true;
      live_size[e.slot] = e.size;
      live_bytes += e.size;
      peak = std::max(peak, live_bytes);
    } else {
      if (!live[e.slot]) refuse(i, fmt::format("slot {} is freed while not live", e.slot));
      live[e.slot] = false;
      live_bytes -= live_size[e.slot];
    }
  }
  if (peak != trace.peak_live_bytes) {
    throw invalid_argument(
        fmt::format("trace {}: peak_live_bytes says {} but its events peak at {} live bytes",
                    trace.name, trace.peak_live_bytes, peak));
  }
}

}  // namespace

allocation_trace scale_trace(allocation_trace const& trace, double factor) {
  CUBERT_EXPECTS(std::isfinite(factor) && factor > 0,
                 fmt::format("scale_trace: factor {} must be a positive number", factor));
  check_trace(trace);
  allocation_trace out;
  out.name = fmt::format("{}x{}", trace.name, factor);
  out.events = trace.events;
  out.allocations = trace.allocations;
  std::vector<std::uint64_t> sizes(trace.allocations);
  std::uint64_t live = 0;
  std::uint64_t live_count = 0;
  for (auto& e : out.events) {
    if (e.alloc) {
      // In long double, which holds every 64-bit size exactly (a double rounds sizes past 2^53,
      // and 2^64 - 1 up to 2^64). Converting 2^64 or more is undefined (x86-64 gave 0, so a
      // 1-byte request), and a live sum past 2^64 - 1 would wrap the peak: either replays a
      // different trace.
      auto const scaled = static_cast<long double>(e.size) * static_cast<long double>(factor);
      if (scaled >= 0x1p64L) {
        throw invalid_argument(
            fmt::format("scale_trace: {} x {}: allocation id {} of {} bytes scales past 2^64 - 1",
                        trace.name, factor, e.id, e.size));
      }
      e.size = e.size == 0 ? 0 : std::max<std::uint64_t>(1, static_cast<std::uint64_t>(scaled));
      if (e.size > std::numeric_limits<std::uint64_t>::max() - live) {
        throw invalid_argument(
            fmt::format("scale_trace: {} x {}: allocation id {} takes the live bytes past 2^64 - 1",
                        trace.name, factor, e.id));
      }
      sizes[e.slot] = e.size;
      live += e.size;
      ++live_count;
      out.peak_live_bytes = std::max(out.peak_live_bytes, live);
      out.largest_request = std::max(out.largest_request, e.size);
    } else {
      e.size = sizes[e.slot];
      live -= e.size;
      --live_count;
    }
  }
  out.never_freed = live_count;
  return out;
}

namespace {

struct pass_result {
  double ns_per_event;
  std::uint64_t peak_reserved;
  storage_counts storage;
  storage_counts first_half;
  usage_report report;
  std::uint64_t warm_calls = 0;          // of the second pass, when asked for
  std::uint64_t warm_peak_reserved = 0;  // over both passes
};

// `warm`: after the timed pass, drop what it left live and play the trace again, untimed, over
// the same manager (a training loop's later steps).
pass_result run_pass(allocation_trace const& trace, memory_configuration const& config,
                     replay_options const& options, bool warm) {
  auto const& props = options.properties;
  std::unique_ptr<backend::storage> inner;
  if (options.host_memory) {
    inner = std::make_unique<host_storage>(std::max<std::uint64_t>(props.alignment, 64));
  }
  auto storage = std::make_unique<counting_storage>(props.alignment, std::move(inner));
  auto const& counter = *storage;
  memory_manager manager(std::move(storage), props, config);
  std::vector<slice_handle> live(trace.allocations);
  auto const play = [&](auto first, auto last) {
    auto it = first;
    try {
      for (; it != last; ++it) {
        if (it->alloc) {
          live[it->slot] = manager.reserve(it->size);
        } else {
          live[it->slot] = slice_handle{};
        }
      }
    } catch (out_of_memory const& e) {
      // The manager's message names neither the trace nor the event that could not be served.
      throw out_of_memory(fmt::format("trace {}, allocation id {} (event {} of {}) under {}: {}",
                                      trace.name, it->id, it - trace.events.begin() + 1,
                                      trace.events.size(), config.name(), e.what()));
    }
  };
  auto const middle = trace.events.begin() + static_cast<std::ptrdiff_t>(trace.events.size() / 2);
  auto const start = std::chrono::steady_clock::now();
  play(trace.events.begin(), middle);
  auto const first_half = counter.counts();  // a copy of four counters: nothing to time
  play(middle, trace.events.end());
  auto const stop = std::chrono::steady_clock::now();
  auto const ns = std::chrono::duration<double, std::nano>(stop - start).count();
  pass_result r{trace.events.empty() ? 0.0 : ns / static_cast<double>(trace.events.size()),
                manager.peak_bytes_reserved(), counter.counts(), first_half, manager.report()};
  if (warm) {
    for (auto& h : live) h = slice_handle{};
    auto const before = counter.counts().calls();
    play(trace.events.begin(), trace.events.end());
    r.warm_calls = counter.counts().calls() - before;
    r.warm_peak_reserved = manager.peak_bytes_reserved();
  }
  live.clear();
  return r;
}

}  // namespace

double storage_cost_model::cost_ns(storage_counts const& calls) const noexcept {
  constexpr double mib = 1024.0 * 1024.0;
  return static_cast<double>(calls.allocs) * alloc_ns +
         static_cast<double>(calls.alloc_bytes) / mib * alloc_ns_per_mib +
         static_cast<double>(calls.frees) * free_ns +
         static_cast<double>(calls.free_bytes) / mib * free_ns_per_mib;
}

replay_result replay_trace(allocation_trace const& trace, memory_configuration const& config,
                           replay_options const& options) {
  auto const& m = options.storage_cost;
  for (double term : {m.alloc_ns, m.alloc_ns_per_mib, m.free_ns, m.free_ns_per_mib}) {
    CUBERT_EXPECTS(
        std::isfinite(term) && term >= 0,
        fmt::format("replay_options: storage cost term {} must be a non-negative number", term));
  }
  check_trace(trace);
  replay_result out;
  out.configuration = std::string(config.name());
  out.events = trace.events.size();
  out.peak_live_bytes = trace.peak_live_bytes;
  auto first = run_pass(trace, config, options, true);
  out.peak_reserved_bytes = first.peak_reserved;
  out.storage = first.storage;
  out.late_storage_calls = first.storage.calls() - first.first_half.calls();
  out.report = std::move(first.report);
  out.ns_per_event = first.ns_per_event;
  for (int i = 1; i < options.repetitions; ++i) {
    out.ns_per_event =
        std::min(out.ns_per_event, run_pass(trace, config, options, false).ns_per_event);
  }
  out.ratio = reserved_over_live(out.peak_reserved_bytes, trace.peak_live_bytes);
  auto const events = static_cast<double>(std::max<std::uint64_t>(out.events, 1));
  auto const calls = static_cast<double>(out.storage.calls());
  out.storage_calls_per_1000_events = calls * 1000.0 / events;
  auto const late_events =
      static_cast<double>(std::max<std::uint64_t>(out.events - out.events / 2, 1));
  out.late_calls_per_1000_events =
      static_cast<double>(out.late_storage_calls) * 1000.0 / late_events;
  out.modelled_ns_per_event = out.ns_per_event + m.cost_ns(out.storage) / events;
  out.warm_storage_calls = first.warm_calls;
  out.warm_ratio = reserved_over_live(first.warm_peak_reserved, trace.peak_live_bytes);
  return out;
}

}  // namespace cubert::memory
