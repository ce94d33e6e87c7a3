// SPDX-License-Identifier: Apache-2.0
// cubert.toml parsing. Every key is checked: an unknown key or a wrong type is a config_error
// naming the file and line, because a silently ignored typo ("chekcs = true") is worse than a
// refusal.
#include "config/config_names.hpp"
#include "config/log_files.hpp"

#include <cubert/config.hpp>
#include <cubert/error.hpp>
#include <cubert/logging.hpp>

#include <fmt/format.h>
#include <fmt/std.h>
#include <toml++/toml.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace cubert {

namespace fs = std::filesystem;

namespace {

class file_reader {
 public:
  // The folder is made absolute now: relative paths in the file name places at load time, not
  // wherever the program's working directory moves later (a relative `file` gave relative ones).
  explicit file_reader(fs::path const& file) : file_(file.string()) {
    std::error_code ec;
    auto const absolute = fs::absolute(file, ec);
    base_dir_ = (ec ? file : absolute).parent_path();
  }

  void read(toml::table const& root, config& cfg) const {
    // The name is matched before the type: `checks = true` above every header is an unknown
    // key, not a section that should have been a table.
    for (auto const& [key, node] : root) {
      if (key == "profiling") {
        read_profiling(*as_table(key, node), cfg.profiling);
      } else if (key == "autotune") {
        read_autotune(*as_table(key, node), cfg.autotune);
      } else if (key == "compilation") {
        read_compilation(*as_table(key, node), cfg.compilation);
      } else if (key == "memory") {
        read_memory(*as_table(key, node), cfg.memory);
      } else if (key == "channel") {
        read_channel(*as_table(key, node), cfg.channel);
      } else if (key == "streaming") {
        read_streaming(*as_table(key, node), cfg.streaming);
      } else {
        unknown(key);
      }
    }
    check_shared_log_files(root, cfg);
  }

 private:
  // A log file is opened once for every category naming it, so two `append` settings for it
  // cannot both hold: refused here with the line, rather than at first use, where nobody can
  // catch and one category would be silenced.
  void check_shared_log_files(toml::table const& root, config const& cfg) const {
    auto const conflicts = detail::append_conflicts(cfg);
    for (std::size_t i = 0; i < conflicts.size(); ++i) {
      if (!conflicts[i]) continue;
      auto const* table = root[log::to_string(static_cast<log::category>(i))]["log"].as_table();
      auto const* where = table ? table->get("append") : nullptr;
      if (where == nullptr && table != nullptr) where = table->get("file");
      fail(detail::append_conflict_message(cfg, *conflicts[i], i),
           where ? where->source() : toml::source_region{});
    }
  }

  [[noreturn]] void fail(std::string const& what, toml::source_region const& where) const {
    throw config_error(fmt::format("{}:{}: {}", file_, where.begin.line, what), file_,
                       static_cast<int>(where.begin.line));
  }

  [[noreturn]] void unknown(toml::key const& key) const {
    fail(fmt::format("unknown key '{}'", key.str()), key.source());
  }

  toml::table const* as_table(toml::key const& key, toml::node const& node) const {
    auto const* t = node.as_table();
    if (t == nullptr) fail(fmt::format("'{}' must be a table", key.str()), node.source());
    return t;
  }

  std::string string_of(toml::key const& key, toml::node const& node) const {
    auto const* s = node.as_string();
    if (s == nullptr) fail(fmt::format("'{}' must be a string", key.str()), node.source());
    return s->get();
  }

  bool bool_of(toml::key const& key, toml::node const& node) const {
    auto const* b = node.as_boolean();
    if (b == nullptr) fail(fmt::format("'{}' must be a boolean", key.str()), node.source());
    return b->get();
  }

  fs::path path_of(toml::key const& key, toml::node const& node) const {
    fs::path p = string_of(key, node);
    if (p.empty()) fail(fmt::format("'{}' must not be empty", key.str()), node.source());
    // A "\u0000" escape is valid TOML, but the OS would cut the path at the NUL and use another
    // file than the one written.
    if (p.native().find('\0') != fs::path::string_type::npos) {
      fail(fmt::format("'{}' must not contain a NUL character", key.str()), node.source());
    }
    return p.is_relative() ? base_dir_ / p : p;
  }

  // Parses a string value with `parse`, failing with the list of accepted names.
  template <typename Parse>
  auto enum_of(toml::key const& key, toml::node const& node, Parse parse,
               std::string_view accepted) const {
    auto const s = string_of(key, node);
    auto v = parse(s);
    // Quoted with escapes: a NUL from "\u0000" would end what() before the accepted names.
    if (!v)
      fail(fmt::format("'{}' = {:?}: expected one of {}", key.str(), s, accepted), node.source());
    return *v;
  }

  void read_level(toml::key const& key, toml::node const& node, log_level& out) const {
    out = enum_of(key, node, detail::parse_log_level, "disabled|minimal|basic|medium|full");
  }

  void read_log(toml::table const& t, log_config& out) const {
    for (auto const& [key, node] : t) {
      if (key == "level") {
        read_level(key, node, out.level);
      } else if (key == "file") {
        out.file = path_of(key, node);
      } else if (key == "append") {
        out.append = bool_of(key, node);
      } else if (key == "stdout") {
        out.to_stdout = bool_of(key, node);
      } else if (key == "stderr") {
        out.to_stderr = bool_of(key, node);
      } else if (key == "forward") {
        out.forward = enum_of(key, node, detail::parse_forward, "trace|debug|info");
      } else {
        unknown(key);
      }
    }
  }

  void read_profiling(toml::table const& t, config::profiling_section& out) const {
    for (auto const& [key, node] : t) {
      if (key == "level") {
        read_level(key, node, out.log.level);
      } else if (key == "log") {
        read_log(*as_table(key, node), out.log);
      } else {
        unknown(key);
      }
    }
    // Both name the one profiling level; taking either silently would ignore the other.
    auto const* log = t.get_as<toml::table>("log");
    auto const* inner = log ? log->get("level") : nullptr;
    if (auto const* outer = t.get("level"); outer && inner) {
      fail(fmt::format("the profiling level is set twice: 'level' in [profiling] (line {}) and "
                       "in [profiling.log]; keep one",
                       outer->source().begin.line),
           inner->source());
    }
  }

  void read_autotune(toml::table const& t, config::autotune_section& out) const {
    for (auto const& [key, node] : t) {
      if (key == "level") {
        out.level =
            enum_of(key, node, detail::parse_autotune_level, "minimal|balanced|extensive|full");
      } else if (key == "cache_dir") {
        out.cache_dir = path_of(key, node);
      } else if (key == "cache") {
        out.cache_enabled = bool_of(key, node);
      } else if (key == "checks") {
        out.checks = bool_of(key, node);
      } else if (key == "background") {
        out.background = bool_of(key, node);
      } else if (key == "concurrent") {
        out.concurrent = enum_of(key, node, detail::parse_concurrent, "run_default|wait");
      } else if (key == "log_decisions") {
        out.log_decisions = bool_of(key, node);
      } else if (key == "log") {
        read_log(*as_table(key, node), out.log);
      } else {
        unknown(key);
      }
    }
  }

  void read_compilation(toml::table const& t, config::compilation_section& out) const {
    for (auto const& [key, node] : t) {
      if (key == "cache") {
        out.cache_enabled = bool_of(key, node);
      } else if (key == "cache_dir") {
        out.cache_dir = path_of(key, node);
      } else if (key == "log") {
        read_log(*as_table(key, node), out.log);
      } else {
        unknown(key);
      }
    }
  }

  std::uint32_t bounded_of(toml::key const& key, toml::node const& node, detail::bounds b) const {
    auto const* i = node.as_integer();
    if (i == nullptr || i->get() < b.min || i->get() > b.max) {
      fail(fmt::format("'{}' must be an integer from {} to {}", key.str(), b.min, b.max),
           node.source());
    }
    return static_cast<std::uint32_t>(i->get());
  }

  void read_streaming(toml::table const& t, config::streaming_section& out) const {
    for (auto const& [key, node] : t) {
      if (key == "max_streams") {
        out.max_streams = bounded_of(key, node, detail::max_streams_bounds);
      } else {
        unknown(key);
      }
    }
  }

  void read_channel(toml::table const& t, config::channel_section& out) const {
    for (auto const& [key, node] : t) {
      if (key == "spin_us") {
        out.spin_us = bounded_of(key, node, detail::spin_us_bounds);
      } else {
        unknown(key);
      }
    }
  }

  void read_memory(toml::table const& t, config::memory_section& out) const {
    for (auto const& [key, node] : t) {
      if (key == "log") {
        read_log(*as_table(key, node), out.log);
      } else if (key == "pools") {
        out.pools =
            enum_of(key, node, detail::parse_pools, "caching|sub_slices|exclusive_pages|compact");
      } else if (key == "persistent_memory") {
        out.persistent =
            enum_of(key, node, detail::parse_persistent_memory, "enabled|disabled|enforced");
      } else {
        unknown(key);
      }
    }
  }

  std::string file_;
  fs::path base_dir_;
};

// toml++ recurses once per table level, both while parsing and while destroying, so a key with
// tens of thousands of dotted parts overflows the stack. A valid cubert.toml nests at most three
// tables and holds no floats or arrays, so a line with more dots than this outside strings and
// comments is refused before toml++ sees it. (Array and inline-table nesting, which may span
// lines, is capped by toml++ itself at TOML_MAX_NESTED_VALUES.)
constexpr std::size_t max_dots_per_line = 64;

// The first line (from 1) with more than max_dots_per_line dots outside strings and comments,
// or 0 when there is none.
std::size_t first_too_nested_line(std::string_view text) {
  enum class in { code, comment, basic, literal, multi_basic, multi_literal };
  in state = in::code;
  std::size_t line = 1;
  std::size_t dots = 0;
  auto const opens = [&](std::size_t i, std::string_view delim) {
    return text.substr(i, delim.size()) == delim;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    char const c = text[i];
    if (c == '\n') {
      ++line;
      dots = 0;
      if (state != in::multi_basic && state != in::multi_literal) state = in::code;
      continue;
    }
    switch (state) {
      case in::code:
        if (c == '#') {
          state = in::comment;
        } else if (c == '.') {
          if (++dots > max_dots_per_line) return line;
        } else if (c == '"') {
          state = opens(i, R"(""")") ? in::multi_basic : in::basic;
          if (state == in::multi_basic) i += 2;
        } else if (c == '\'') {
          state = opens(i, "'''") ? in::multi_literal : in::literal;
          if (state == in::multi_literal) i += 2;
        }
        break;
      case in::comment:
        break;
      case in::basic:
      case in::multi_basic:
        // Skips the escaped character, but not a newline, which the loop must count.
        if (c == '\\' && i + 1 < text.size() && text[i + 1] != '\n') {
          ++i;
        } else if (c == '"' && (state == in::basic || opens(i, R"(""")"))) {
          if (state == in::multi_basic) i += 2;
          state = in::code;
        }
        break;
      case in::literal:
        if (c == '\'') state = in::code;
        break;
      case in::multi_literal:
        if (opens(i, "'''")) {
          i += 2;
          state = in::code;
        }
        break;
    }
  }
  return 0;
}

[[noreturn]] void malformed(fs::path const& file, int line, std::string_view what) {
  throw config_error(fmt::format("{}:{}: malformed TOML: {}", file.string(), line, what),
                     file.string(), line);
}

}  // namespace

config config::from_file(fs::path const& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    // .string(): fmt/std.h formats a path quoted, which inside '' read as '"/x"'.
    throw io_error(
        fmt::format("configuration file '{}' does not exist or is not a file", file.string()));
  }
  std::string text;
  {
    std::ifstream in(file, std::ios::binary);
    std::ostringstream buffer;
    if (in) buffer << in.rdbuf();
    if (!in || in.bad()) {
      throw io_error(fmt::format("cannot read configuration file '{}'", file.string()));
    }
    text = std::move(buffer).str();
  }
  if (auto const line = first_too_nested_line(text); line != 0) {
    malformed(file, static_cast<int>(line),
              fmt::format("keys nested too deeply (more than {} '.' outside strings on one line)",
                          max_dots_per_line));
  }
  toml::table root;
  try {
    root = toml::parse(text, file.string());
  } catch (toml::parse_error const& e) {
    malformed(file, static_cast<int>(e.source().begin.line), e.description());
  }
  config cfg;
  cfg.source = file;
  file_reader{file}.read(root, cfg);
  return cfg;
}

}  // namespace cubert
