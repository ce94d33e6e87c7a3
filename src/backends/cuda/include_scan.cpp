// SPDX-License-Identifier: Apache-2.0
#include "include_scan.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <cstring>
#include <deque>
#include <fstream>
#include <optional>
#include <set>
#include <system_error>
#include <utility>

namespace cubert::cuda::detail {
namespace {

namespace fs = std::filesystem;
constexpr auto npos = std::string_view::npos;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_ident(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

// Length of the line splice (backslash-newline) at i, or 0: a spliced line is one line.
std::size_t splice_at(std::string_view t, std::size_t i) {
  if (t.substr(i, 2) == "\\\n") return 2;
  return t.substr(i, 3) == "\\\r\n" ? 3 : 0;
}

// Index just past the comment starting at i (a line comment stops before its newline), or i.
std::size_t skip_comment(std::string_view t, std::size_t i) {
  if (t.substr(i, 2) == "//") {
    // Splicing comes before comments: a line comment ending in a backslash takes the next line
    // with it, so a "/*" there opens nothing and a "#include" there is no directive.
    for (auto nl = t.find('\n', i + 2);; nl = t.find('\n', nl + 1)) {
      if (nl == npos) return t.size();
      auto end = nl;
      if (end > i + 2 && t[end - 1] == '\r') --end;
      if (end == i + 2 || t[end - 1] != '\\') return nl;
    }
  }
  if (t.substr(i, 2) == "/*") {
    auto const end = t.find("*/", i + 2);
    return end == npos ? t.size() : end + 2;
  }
  return i;
}

// Blanks, splices and comments inside a directive: a block comment is one space, even across
// lines, so `#/* x */include` is still a directive.
std::size_t skip_blanks(std::string_view t, std::size_t i) {
  while (i < t.size()) {
    if (is_blank(t[i])) {
      ++i;
    } else if (std::size_t const n = splice_at(t, i)) {
      i += n;
    } else if (std::size_t const j = skip_comment(t, i); j != i && t[i + 1] == '*') {
      i = j;
    } else {
      break;
    }
  }
  return i;
}

// Index past the character or string literal opened at i. Literals are skipped so that a "/*"
// or "//" inside one does not hide the includes after it; an unterminated one ends its line.
std::size_t skip_literal(std::string_view t, std::size_t i) {
  char const quote = t[i++];
  while (i < t.size() && t[i] != '\n') {
    if (t[i] == '\\') {
      i += 2;
    } else if (t[i++] == quote) {
      return i;
    }
  }
  return std::min(i, t.size());
}

// Index past the raw string literal whose opening quote is at i (R"delim( ... )delim").
std::size_t skip_raw_string(std::string_view t, std::size_t i) {
  auto const open = t.find_first_of("( )\\\n", i + 1);
  if (open == npos || t[open] != '(' || open - i - 1 > 16) return skip_literal(t, i);
  std::string const close = fmt::format("){}\"", t.substr(i + 1, open - i - 1));
  auto const end = t.find(close, open + 1);
  return end == npos ? t.size() : end + close.size();
}

// Index past the preprocessing number at i, so that a digit separator (1'000) is not taken for
// the start of a character literal.
std::size_t skip_number(std::string_view t, std::size_t i) {
  while (i < t.size()) {
    char const c = t[i];
    bool const sign_follows = i + 1 < t.size() && (t[i + 1] == '+' || t[i + 1] == '-');
    if ((c == 'e' || c == 'E' || c == 'p' || c == 'P') && sign_follows) {
      i += 2;
    } else if (is_ident(c) || c == '.') {
      ++i;
    } else if (c == '\'' && i + 1 < t.size() && is_ident(t[i + 1])) {
      i += 2;
    } else {
      break;
    }
  }
  return i;
}

// Parses the directive whose '#' is just before i; returns where scanning goes on.
std::size_t parse_directive(std::string_view t, std::size_t i,
                            std::vector<include_directive>& out) {
  i = skip_blanks(t, i);
  // Splicing comes before tokens, so a backslash-newline may split the directive's name.
  std::string name;
  while (i < t.size()) {
    if (is_ident(t[i])) {
      name += t[i++];
    } else if (std::size_t const n = splice_at(t, i)) {
      i += n;
    } else {
      break;
    }
  }
  if (name != "include" && name != "include_next") return i;
  i = skip_blanks(t, i);
  if (i >= t.size() || (t[i] != '"' && t[i] != '<')) return i;  // A macro-computed name.
  bool const quoted = t[i] == '"';
  char const close = quoted ? '"' : '>';
  std::string header;  // Spliced lines joined, as in the name.
  for (std::size_t j = i + 1; j < t.size() && t[j] != '\n';) {
    if (std::size_t const n = splice_at(t, j)) {
      j += n;
    } else if (t[j] != close) {
      header += t[j++];
    } else if (header.empty()) {
      break;
    } else {
      out.push_back({std::move(header), quoted, name == "include_next"});
      return j + 1;
    }
  }
  return i;
}

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

  // Queues what `d`, included from a file in `from`, resolves to, unless already queued.
  void follow(include_directive const& d, fs::path const& from) {
    if (!d.next) {
      if (auto found = resolve(d, from)) queue(std::move(*found));
      return;
    }
    // The search resumes after the directory the including header came from, which resolving
    // from the start would find again (already seen): every match in the include directories
    // covers the one NVRTC takes, at worst with a needless miss.
    for (auto const& dir : dirs_) {
      if (is_file(dir / d.name)) queue(dir / d.name);
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

  include_scan run() && {
    while (!queue_.empty() && !result_.truncated) {
      auto [found, canonical] = std::move(queue_.front());
      queue_.pop_front();
      auto const text = read(canonical);
      if (!text) continue;
      hash(canonical.string());
      hash(*text);
      result_.files.push_back(std::move(canonical));
      for (auto const& d : find_includes(*text)) follow(d, found.parent_path());
    }
    if (!result_.files.empty()) {
      XXH128_hash_t const h = XXH3_128bits_digest(&state_);
      result_.digest = fmt::format("{:016x}{:016x}", h.high64, h.low64);
    }
    return std::move(result_);
  }

 private:
  std::optional<fs::path> resolve(include_directive const& d, fs::path const& from) const {
    fs::path const name(d.name);
    if (name.is_absolute()) return is_file(name) ? std::optional(name) : std::nullopt;
    // An empty `from` is the working directory, where NVRTC looks for a bare source name's.
    if (d.quoted && is_file(from / name)) return from / name;
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
    std::uint64_t const n = part.size();
    XXH3_128bits_update(&state_, &n, sizeof n);
    XXH3_128bits_update(&state_, part.data(), part.size());
  }

  std::vector<fs::path> dirs_;
  include_scan_limits limits_;
  std::deque<std::pair<fs::path, fs::path>> queue_;  // As found, and canonical.
  std::set<fs::path> seen_;
  std::uintmax_t bytes_ = 0;
  XXH3_state_t state_{};
  include_scan result_;
};

}  // namespace

std::vector<include_directive> find_includes(std::string_view t) {
  std::vector<include_directive> out;
  // Every directive spells "include", unless a line splice cuts it: a text with neither, as
  // most kernels are, costs a search or two (glibc's memmem: 2-5 times faster than
  // string_view::find here).
  if (t.size() < 7 || (::memmem(t.data(), t.size(), "include", 7) == nullptr &&
                       ::memmem(t.data(), t.size(), "\\\n", 2) == nullptr &&
                       ::memmem(t.data(), t.size(), "\\\r\n", 3) == nullptr)) {
    return out;
  }
  bool line_start = true;
  // A UTF-8 byte order mark is not a token: a directive right after it starts the line.
  std::size_t i = t.starts_with("\xEF\xBB\xBF") ? 3 : 0;
  while (i < t.size()) {
    char const c = t[i];
    if (is_ident(c)) {
      line_start = false;
      if (is_digit(c)) {
        i = skip_number(t, i);
        continue;
      }
      auto const start = i;
      while (i < t.size() && is_ident(t[i])) ++i;
      auto const id = t.substr(start, i - start);
      bool const raw = id == "R" || id == "u8R" || id == "uR" || id == "UR" || id == "LR";
      if (raw && i < t.size() && t[i] == '"') i = skip_raw_string(t, i);
      continue;
    }
    switch (c) {
      case '\n':
        line_start = true;
        ++i;
        break;
      case ' ':
      case '\t':
      case '\r':
      case '\v':
      case '\f':
        ++i;
        break;
      case '\\':
        if (std::size_t const n = splice_at(t, i)) {
          i += n;
        } else {
          line_start = false;
          ++i;
        }
        break;
      case '/':  // A comment is a space: a directive may follow it.
        if (std::size_t const j = skip_comment(t, i); j != i) {
          i = j;
        } else {
          line_start = false;
          ++i;
        }
        break;
      case '#':
        i = line_start ? parse_directive(t, i + 1, out) : i + 1;
        line_start = false;
        break;
      case '%':  // "%:" is the digraph of '#'.
        i = line_start && t.substr(i, 2) == "%:" ? parse_directive(t, i + 2, out) : i + 1;
        line_start = false;
        break;
      case '"':
      case '\'':
        i = skip_literal(t, i);
        line_start = false;
        break;
      case '.':
        i = i + 1 < t.size() && is_digit(t[i + 1]) ? skip_number(t, i) : i + 1;
        line_start = false;
        break;
      default:
        ++i;
        line_start = false;
    }
  }
  return out;
}

std::vector<fs::path> include_dirs(std::span<std::string const> options) {
  auto const values = option_values(options, "-I", true, "--include-path");
  return {values.begin(), values.end()};
}

include_scan scan_includes(std::string_view source, std::string_view source_name,
                           std::span<std::string const> options, include_scan_limits limits) {
  auto const pre = option_values(options, "-include", false, "--pre-include");
  auto const includes = find_includes(source);
  if (pre.empty() && includes.empty()) return {};
  include_walker walker(include_dirs(options), limits);
  fs::path const source_dir = fs::path(source_name).parent_path();
  for (auto const name : pre) walker.follow({std::string(name), true}, source_dir);
  for (auto const& d : includes) walker.follow(d, source_dir);
  return std::move(walker).run();
}

}  // namespace cubert::cuda::detail
