// SPDX-License-Identifier: Apache-2.0
#include "kernel/include_scan.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <system_error>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace cubert::detail {
namespace {

namespace fs = std::filesystem;
constexpr auto npos = std::string_view::npos;

// The value of option `name` at options[i] ("name value" as two options, "name=value", or with
// `attached`, "namevalue"), advancing i past a separate value; nullopt for another option.
std::optional<std::string_view> option_value(std::span<std::string const> options, std::size_t& i,
                                             std::string_view name, bool attached) {
  std::string_view const o = options[i];
  if (o == name) {
    if (i + 1 >= options.size()) return std::nullopt;
    return options[++i];
  }
  if (!o.starts_with(name)) return std::nullopt;
  std::string_view rest = o.substr(name.size());
  if (rest.starts_with('=')) return rest.substr(1);
  return attached ? std::optional(rest) : std::nullopt;
}

// Every non-empty value of an option spelt `short_name` (attached or not) or `long_name`.
std::vector<std::string_view> option_values(std::span<std::string const> options,
                                            std::string_view short_name, bool short_attached,
                                            std::string_view long_name) {
  std::vector<std::string_view> values;
  for (std::size_t i = 0; i < options.size(); ++i) {
    auto v = option_value(options, i, short_name, short_attached);
    if (!v) v = option_value(options, i, long_name, false);
    if (v && !v->empty()) values.push_back(*v);
  }
  return values;
}

// The macros `-D NAME=value` / `--define-macro NAME=value` options give a header name or
// another macro's name.
std::vector<header_macro> defined_macros(std::span<std::string const> options) {
  std::vector<header_macro> out;
  for (auto const v : option_values(options, "-D", true, "--define-macro")) {
    auto const eq = v.find('=');
    if (eq == npos || v.substr(0, eq).find('(') != npos) continue;
    if (auto value = header_value(v.substr(eq + 1))) {
      out.push_back({std::string(v.substr(0, eq)), std::move(*value)});
    }
  }
  return out;
}

// The macro calls of function-like `-D 'NAME(params)=body'` options, read as the #define they
// are: `-D 'HAS(x)=__has_include(x)'` makes HAS a probe wrapper.
std::vector<macro_call> defined_calls(std::span<std::string const> options) {
  std::vector<macro_call> out;
  for (auto const v : option_values(options, "-D", true, "--define-macro")) {
    auto const eq = v.find('=');
    if (eq == npos || v.substr(0, eq).find('(') == npos) continue;
    auto const define = fmt::format("#define {} {}\n", v.substr(0, eq), v.substr(eq + 1));
    (void)find_includes(define, nullptr, &out);
  }
  return out;
}

bool is_file(fs::path const& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// A breadth-first walk of the include graph; the order of the files, and so the digest, depends
// only on the files' contents and the options.
class include_walker {
 public:
  include_walker(std::vector<fs::path> dirs, include_scan_limits limits)
      : dirs_(std::move(dirs)), limits_(limits) {
    XXH3_128bits_reset(&state_);
  }

  // Queues what `d`, included from a file in `from`, resolves to, unless already queued. A
  // computed one waits for run() to know its macro's values.
  void follow(include_directive const& d, fs::path const& from) {
    if (d.computed) {
      computed_.push_back({d, from});
      return;
    }
    bool found_any = false;
    // An #include_next in the source is an #include to NVRTC (it warns), a quoted one looking
    // next to the source first: the plain resolution covers that case.
    if (auto found = resolve(d, from)) {
      queue(std::move(*found));
      found_any = true;
    }
    if (d.next) {
      // The search resumes after the directory the including header came from, which
      // resolving from the start would find again (already seen): every match in the include
      // directories covers the one NVRTC takes, at worst with a needless miss.
      for (auto const& dir : dirs_) {
        if (is_file(dir / d.name)) {
          queue(dir / d.name);
          found_any = true;
        }
      }
    }
    // A probe's answer changes the code even when it finds nothing (`#if __has_include(...)`):
    // its absence is hashed, so that the header appearing later misses. An include found
    // nowhere is one of NVRTC's built-ins, or fails to compile: nothing to record.
    if (d.probe && !found_any) {
      hash(fmt::format("absent {}{}{}", d.next ? "next " : "", d.quoted ? '"' : '<', d.name));
    }
  }

  void queue(fs::path found) {
    if (result_.truncated) return;
    std::error_code ec;
    fs::path canonical = fs::canonical(found, ec);
    if (ec) return;
    if (!seen_.insert(canonical).second) return;
    if (seen_.size() > limits_.max_files) {
      result_.truncated = true;
      return;
    }
    queue_.emplace_back(std::move(found), std::move(canonical));
  }

  void add_macros(std::vector<header_macro>&& macros) {
    for (auto& m : macros) {
      // `#define HAS __has_include` (or a wrapper's name): HAS(<x.h>) probes as what it names.
      if (m.value.computed) {
        aliases_.emplace(m.value.name, m.name);
        positions_stale_ = true;
      }
      macros_.emplace(std::move(m.name), std::move(m.value));
    }
  }

  // Calls made in a file in `from`: a wrapper's definition, or a use that probes if its callee
  // turns out to be one.
  void add_calls(std::vector<macro_call>&& calls, fs::path const& from) {
    for (auto& c : calls) {
      if (!c.macro.empty()) {
        wraps_.emplace(position{std::move(c.callee), c.argument},
                       position{std::move(c.macro), c.parameter});
        positions_stale_ = true;
      } else if (wrapped_seen_
                     .emplace(c.callee, c.argument, c.header.name, c.header.quoted,
                              c.header.computed, c.header.local, from.native())
                     .second) {
        wrapped_.push_back({std::move(c), from});
      }
    }
  }

  include_scan run() && {
    // A macro may be defined in a header found after the include that uses it: walk, then
    // follow the computed includes with every value known so far, until nothing new comes.
    do {
      walk();
    } while (!result_.truncated && expand());
    for (auto const& c : computed_)
      result_.computed = result_.computed || !c.expanded || !c.complete;
    if (hashed_) {
      XXH128_hash_t const h = XXH3_128bits_digest(&state_);
      result_.digest = fmt::format("{:016x}{:016x}", h.high64, h.low64);
    }
    return std::move(result_);
  }

 private:
  struct computed_include {
    include_directive directive;
    fs::path from;
    bool expanded = false;  // Some value of its macro names a header.
    bool complete = true;   // As of the last expand(): see macro_values.
  };

  void walk() {
    while (!queue_.empty() && !result_.truncated) {
      auto [found, canonical] = std::move(queue_.front());
      queue_.pop_front();
      auto const text = read(canonical);
      if (!text) continue;
      hash(canonical.string());
      hash(*text);
      result_.files.push_back(std::move(canonical));
      std::vector<header_macro> macros;
      std::vector<macro_call> calls;
      for (auto const& d : find_includes(*text, &macros, &calls)) follow(d, found.parent_path());
      add_macros(std::move(macros));
      add_calls(std::move(calls), found.parent_path());
    }
  }

  // Follows each computed include with the header names its macro has not been followed with
  // yet, and each call of a probe wrapper known so far; whether it followed any.
  bool expand() {
    bool progress = follow_wrapped();
    for (std::size_t i = 0; i < computed_.size(); ++i) {
      auto const known = values_of(computed_[i].directive.name);
      computed_[i].complete = known.complete;
      for (auto const& value : known.values) {
        if (!expanded_.emplace(i, value.name, value.quoted).second) continue;
        auto d = computed_[i].directive;
        d.name = value.name;
        d.quoted = value.quoted;
        d.computed = false;
        computed_[i].expanded = true;
        progress = true;
        follow(d, computed_[i].from);
      }
    }
    return progress;
  }

  // Which arguments of which macros end up as a `__has_include` (bit 0) or `__has_include_next`
  // (bit 1) operand, through macros passing their parameters on: a search from the two.
  void update_probe_positions() {
    if (!positions_stale_) return;
    positions_stale_ = false;
    positions_ = {{{"__has_include", 0}, 1U}, {{"__has_include_next", 0}, 2U}};
    std::vector<position> pending{{"__has_include", 0}, {"__has_include_next", 0}};
    while (!pending.empty()) {
      auto const at = std::move(pending.back());
      pending.pop_back();
      unsigned const bits = positions_[at];
      auto const spread = [&](position to) {
        auto& to_bits = positions_[to];
        if ((to_bits | bits) == to_bits) return;
        to_bits |= bits;
        pending.push_back(std::move(to));
      };
      auto const [first, last] = wraps_.equal_range(at);
      for (auto it = first; it != last; ++it) spread(it->second);
      // An object-like macro naming this one is called with the same arguments.
      auto const [alias, end] = aliases_.equal_range(at.name);
      for (auto it = alias; it != end; ++it) spread({it->second, at.argument});
    }
  }

  // Follows, as probes, the wrapper calls whose callee is known to wrap one by now.
  bool follow_wrapped() {
    if (wrapped_.empty()) return false;
    update_probe_positions();
    bool progress = false;
    for (auto& w : wrapped_) {
      auto const it = positions_.find({w.call.callee, w.call.argument});
      unsigned const fresh = it == positions_.end() ? 0U : it->second & ~w.followed;
      if (fresh == 0) continue;
      for (unsigned bit = 1; bit <= 2; bit <<= 1) {
        if ((fresh & bit) == 0) continue;
        auto d = w.call.header;
        d.probe = true;
        d.next = bit == 2;
        follow(d, w.from);
      }
      w.followed |= fresh;
      progress = true;
    }
    return progress;
  }

  struct macro_values {
    std::vector<include_directive> values;
    // No macro on the way names something other than a header or a macro with values: a
    // function-like one (`STR(x.h)`), or one defined nowhere the scan looks, names a header
    // the key cannot cover even where other values are known.
    bool complete = true;
  };

  // The header names macro `name` may expand to, through macros naming macros.
  macro_values values_of(std::string const& name) const {
    macro_values out;
    std::vector<std::string> pending{name};
    std::set<std::string> visited;
    while (!pending.empty()) {
      if (visited.size() >= 256) {
        out.complete = false;
        break;
      }
      auto const n = std::move(pending.back());
      pending.pop_back();
      if (!visited.insert(n).second) continue;  // A cycle does not compile: it names nothing.
      auto const [first, last] = macros_.equal_range(n);
      if (first == last && n != name) out.complete = false;
      for (auto it = first; it != last; ++it) {
        if (it->second.computed) {
          pending.push_back(it->second.name);
        } else {
          out.values.push_back(it->second);
        }
      }
    }
    return out;
  }

  std::optional<fs::path> resolve(include_directive const& d, fs::path const& from) const {
    fs::path const name(d.name);
    if (name.is_absolute()) return is_file(name) ? std::optional(name) : std::nullopt;
    // An empty `from` is the working directory, where NVRTC looks for a bare source name's.
    if (d.quoted && d.local && is_file(from / name)) return from / name;
    for (auto const& dir : dirs_) {
      if (is_file(dir / name)) return dir / name;
    }
    return std::nullopt;
  }

  std::optional<std::string> read(fs::path const& path) {
    std::error_code ec;
    auto const size = fs::file_size(path, ec);
    if (ec) return std::nullopt;
    if (size > limits_.max_bytes - bytes_) {
      result_.truncated = true;
      return std::nullopt;
    }
    std::ifstream in(path, std::ios::binary);
    std::string text(size, '\0');
    if (!in.read(text.data(), static_cast<std::streamsize>(size))) return std::nullopt;
    bytes_ += text.size();
    return text;
  }

  // Length-prefixed, so that bytes moved between a path and a file change the digest.
  void hash(std::string_view part) {
    hashed_ = true;
    std::uint64_t const n = part.size();
    XXH3_128bits_update(&state_, &n, sizeof n);
    XXH3_128bits_update(&state_, part.data(), part.size());
  }

  std::vector<fs::path> dirs_;
  include_scan_limits limits_;
  std::deque<std::pair<fs::path, fs::path>> queue_;  // As found, and canonical.
  std::set<fs::path> seen_;
  std::uintmax_t bytes_ = 0;
  bool hashed_ = false;
  std::multimap<std::string, include_directive> macros_;  // Equal names keep their order.
  std::vector<computed_include> computed_;
  struct position {
    std::string name;
    std::size_t argument = 0;
    friend bool operator==(position const&, position const&) = default;
  };
  struct position_hash {
    std::size_t operator()(position const& p) const noexcept {
      return std::hash<std::string>{}(p.name) ^ (p.argument * 0x9e3779b97f4a7c15ULL);
    }
  };
  // (callee, argument) -> (macro, parameter): the macro passes its parameter on to the callee.
  std::unordered_multimap<position, position, position_hash> wraps_;
  // Value -> name of each object-like macro whose value is another macro's name.
  std::unordered_multimap<std::string, std::string> aliases_;
  // Which operand of `__has_include` (bit 0) or `__has_include_next` (bit 1) each is.
  std::unordered_map<position, unsigned, position_hash> positions_;
  bool positions_stale_ = true;
  struct wrapped_call {
    macro_call call;
    fs::path from;
    unsigned followed = 0;  // As a probe (bit 0) and as a next-probe (bit 1).
  };
  std::vector<wrapped_call> wrapped_;
  // (callee, argument, header, quoted, computed, local, directory): each is followed once.
  std::set<std::tuple<std::string, std::size_t, std::string, bool, bool, bool, std::string>>
      wrapped_seen_;
  std::set<std::tuple<std::size_t, std::string, bool>> expanded_;  // (computed_ index, value)
  XXH3_state_t state_{};
  include_scan result_;
};

}  // namespace

std::vector<fs::path> include_dirs(std::span<std::string const> options) {
  auto const values = option_values(options, "-I", true, "--include-path");
  return {values.begin(), values.end()};
}

include_scan scan_includes(std::string_view source, std::string_view source_name,
                           std::span<std::string const> options, include_scan_limits limits) {
  auto const pre = option_values(options, "-include", false, "--pre-include");
  auto defined_wrappers = defined_calls(options);
  // Most kernels: one search for "include". The source's macros matter only with a header, its
  // macro calls only with a wrapper or an alias of `__has_include` (whose definition spells
  // "include", in the source or in a -D option: `-DHAS=__has_include`).
  auto const defines = option_values(options, "-D", true, "--define-macro");
  bool const defines_probe = std::any_of(defines.begin(), defines.end(), [](auto const& v) {
    return v.find("include") != std::string_view::npos;
  });
  if (pre.empty() && defined_wrappers.empty() && !defines_probe && !may_hold(source, "include")) {
    return {};
  }
  std::vector<header_macro> macros;
  std::vector<macro_call> calls;
  auto const includes = find_includes(source, &macros, &calls);
  auto const uses_wrapper = [](macro_call const& c) { return c.macro.empty(); };
  if (pre.empty() && includes.empty() && std::none_of(calls.begin(), calls.end(), uses_wrapper)) {
    return {};
  }
  include_walker walker(include_dirs(options), limits);
  walker.add_macros(defined_macros(options));
  walker.add_macros(std::move(macros));
  fs::path const source_dir = fs::path(source_name).parent_path();
  // NVRTC's --no-source-include keeps the source's directory out of the search: its quoted
  // includes, computed ones' quoted values included, then look where angle ones do. (Headers
  // still look next to themselves first.)
  bool const source_dir_searched = std::none_of(
      options.begin(), options.end(),
      [](std::string const& o) { return o == "-no-source-include" || o == "--no-source-include"; });
  auto const from_source = [&](include_directive d) {
    d.local = source_dir_searched;
    return d;
  };
  for (auto* list : {&defined_wrappers, &calls}) {
    for (auto& c : *list) c.header = from_source(std::move(c.header));
  }
  walker.add_calls(std::move(defined_wrappers), source_dir);
  walker.add_calls(std::move(calls), source_dir);
  // A pre-include is looked for in the working directory, then the -I directories: never next
  // to the source, whatever -no-source-include says (NVRTC 13.0, checked on the device).
  for (auto const name : pre) walker.follow({std::string(name), true}, fs::path{});
  for (auto const& d : includes) walker.follow(from_source(d), source_dir);
  return std::move(walker).run();
}

}  // namespace cubert::detail
