// SPDX-License-Identifier: Apache-2.0
#include "include_scan.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <system_error>
#include <tuple>
#include <unordered_map>
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

// The text after translation phases 1 and 2 (trigraphs replaced when asked, line splices
// removed), which every later phase sees: a splice may cut any token, "*/" and "//" included.
// Raw strings revert both, so they are read in the original text, through the map kept here.
class logical_text {
 public:
  logical_text(std::string_view original, bool trigraphs) : original_(original) {
    if (!trigraphs && original.find("\\\n") == npos && original.find("\\\r\n") == npos) {
      text_ = original;
      return;
    }
    translated_.reserve(original.size());
    for (std::size_t o = 0; o < original.size();) {
      char c = original[o];
      std::size_t n = 1;
      if (trigraphs && original.substr(o, 2) == "??" && o + 2 < original.size()) {
        if (auto const k = std::string_view("=/'()!<>-").find(original[o + 2]); k != npos) {
          c = "#\\^[]|{}~"[k];
          n = 3;
        }
      }
      // One pass: a backslash left before a newline by a splice splices nothing.
      if (c == '\\') {
        auto const rest = original.substr(o + n, 2);
        std::size_t const newline = rest.starts_with('\n') ? 1 : rest == "\r\n" ? 2 : 0;
        if (newline != 0) {
          o += n + newline;
          jumps_.emplace_back(translated_.size(), o);
          continue;
        }
      }
      translated_ += c;
      o += n;
      if (n != 1) jumps_.emplace_back(translated_.size(), o);
    }
    text_ = translated_;
  }
  logical_text(logical_text const&) = delete;
  logical_text& operator=(logical_text const&) = delete;

  [[nodiscard]] std::string_view text() const { return text_; }
  [[nodiscard]] std::string_view original() const { return original_; }

  [[nodiscard]] std::size_t to_original(std::size_t i) const {
    auto const it = std::upper_bound(jumps_.begin(), jumps_.end(), i,
                                     [](std::size_t v, auto const& j) { return v < j.first; });
    return it == jumps_.begin() ? i : std::prev(it)->second + (i - std::prev(it)->first);
  }

  // The first logical position at or after original position o.
  [[nodiscard]] std::size_t from_original(std::size_t o) const {
    auto const it = std::upper_bound(jumps_.begin(), jumps_.end(), o,
                                     [](std::size_t v, auto const& j) { return v < j.second; });
    std::size_t i = it == jumps_.begin() ? o : std::prev(it)->first + (o - std::prev(it)->second);
    if (it != jumps_.end()) i = std::min(i, it->first);
    return std::min(i, text_.size());
  }

 private:
  std::string_view original_;
  std::string translated_;
  std::string_view text_;
  // (logical, original) positions from which the two go on in step, after each removed run.
  std::vector<std::pair<std::size_t, std::size_t>> jumps_;
};

// Index just past the comment starting at i (a line comment stops before its newline), or i.
std::size_t skip_comment(std::string_view t, std::size_t i) {
  if (t.substr(i, 2) == "//") return std::min(t.find('\n', i + 2), t.size());
  if (t.substr(i, 2) == "/*") {
    auto const end = t.find("*/", i + 2);
    return end == npos ? t.size() : end + 2;
  }
  return i;
}

// Blanks and comments inside a directive: a block comment is one space, even across lines, so
// `#/* x */include` is still a directive.
std::size_t skip_blanks(std::string_view t, std::size_t i) {
  while (i < t.size()) {
    if (is_blank(t[i])) {
      ++i;
    } else if (t.substr(i, 2) == "/*") {
      i = skip_comment(t, i);
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

// Index past the raw string literal whose opening quote is at i (R"delim( ... )delim"), looked
// for in the original text, since a raw string reverts splices and trigraphs.
std::size_t skip_raw_string(logical_text const& lt, std::size_t i) {
  std::string_view const o = lt.original();
  std::size_t const quote = lt.to_original(i);
  // A delimiter has at most 16 characters: looking no further keeps a line of `R"R"...` linear.
  auto const open = o.substr(quote + 1, 17).find_first_of("( )\\\n");
  if (open == npos || o[quote + 1 + open] != '(') return skip_literal(lt.text(), i);
  std::string const close = fmt::format("){}\"", o.substr(quote + 1, open));
  auto const end = o.find(close, quote + 2 + open);
  return end == npos ? lt.text().size() : lt.from_original(end + close.size());
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

// Reads an identifier at i.
std::size_t read_identifier(std::string_view t, std::size_t i, std::string& name) {
  auto const start = i;
  while (i < t.size() && is_ident(t[i])) ++i;
  name = t.substr(start, i - start);
  return i;
}

// Reads the header name at i ("name" or <name>), or failing that the identifier of a macro that
// computes it (`computed`). Returns where the name ends, or i when there is neither.
std::size_t read_header_name(std::string_view t, std::size_t i, include_directive& d) {
  if (i >= t.size()) return i;
  if (t[i] != '"' && t[i] != '<') {
    if (is_digit(t[i])) return i;
    auto const j = read_identifier(t, i, d.name);
    d.computed = !d.name.empty();
    return j;
  }
  d.quoted = t[i] == '"';
  auto const end = t.find_first_of(d.quoted ? "\"\n" : ">\n", i + 1);
  if (end == npos || t[end] == '\n' || end == i + 1) return i;
  d.name = t.substr(i + 1, end - i - 1);
  return end + 1;
}

class lexer {
 public:
  lexer(std::vector<include_directive>& out, std::vector<header_macro>* macros,
        std::vector<macro_call>* calls)
      : out_(out), macros_(macros), calls_(calls) {}

  // Parses the header name at i into a directive like `d`; returns where scanning goes on.
  std::size_t header(std::string_view t, std::size_t i, include_directive d) {
    // A '<' with no '>' before its line ends: nor has a later one on that line, so a line of
    // `__has_include(<` is read once, not once per probe.
    if (i < t.size() && t[i] == '<' && i < no_angle_close_before_) return i;
    auto const end = read_header_name(t, i, d);
    if (end == i) {
      if (i < t.size() && t[i] == '<') {
        auto const close = t.find_first_of(">\n", i + 1);
        if (close == npos || t[close] == '\n') no_angle_close_before_ = std::min(close, t.size());
      }
      return i;
    }
    out_.push_back(std::move(d));
    return end;
  }

  // Where macro calls may wrap a probe: an #if or #elif line, or a macro's body.
  [[nodiscard]] bool in_expression() const noexcept {
    return calls_ != nullptr && (in_define_ || in_condition_);
  }

  // Opens the parenthesis at i, of a call of `callee` or (empty) a plain one; returns where
  // scanning goes on.
  std::size_t open(std::string_view t, std::size_t i, std::string_view callee) {
    frames_.push_back({callee, 0});
    return argument(t, i + 1);
  }
  std::size_t comma(std::string_view t, std::size_t i) {
    if (frames_.empty()) return i + 1;
    ++frames_.back().argument;
    return argument(t, i + 1);
  }
  void close() noexcept {
    if (!frames_.empty()) frames_.pop_back();
  }

  // Parses what follows `__has_include` or `__has_include_next` at i. Without a '(' it is only
  // named (`defined(__has_include)`): nothing is probed. In a function-like macro's body, an
  // operand that is one of its parameters (`#define HAS(x) __has_include(x)`) is known only
  // where the macro is used; any other probe there (`#define HAS_CFG __has_include("cfg.h")`)
  // is what `#if HAS_CFG` asks.
  std::size_t probe(std::string_view t, std::size_t i, bool next) {
    i = skip_blanks(t, i);
    if (i >= t.size() || t[i] != '(') return i;
    i = skip_blanks(t, i + 1);
    // Its ')' closes this frame, not the call around it.
    if (in_expression()) frames_.push_back({});
    include_directive const probed{.next = next, .probe = true};
    if (in_define_ && i < t.size() && is_ident(t[i])) {
      auto operand = probed;
      auto const end = read_header_name(t, i, operand);
      if (auto const p = parameter_index(operand.name)) {
        if (calls_ != nullptr && !defining_.empty()) {
          macro_call call;
          call.callee = next ? "__has_include_next" : "__has_include";
          call.macro = defining_;
          call.parameter = *p;
          calls_->push_back(std::move(call));
        }
        return end;
      }
    }
    return header(t, i, probed);
  }

  // Parses the directive whose '#' is just before i; returns where scanning goes on.
  std::size_t directive(std::string_view t, std::size_t i) {
    std::string name;
    i = read_identifier(t, skip_blanks(t, i), name);
    if (name == "include" || name == "include_next") {
      return header(t, skip_blanks(t, i), {.next = name == "include_next"});
    }
    if (name == "if" || name == "elif") in_condition_ = true;
    if (name != "define") return i;
    in_define_ = true;
    parameter_map_.clear();
    parameters_.clear();
    i = skip_blanks(t, i);
    if (i >= t.size() || is_digit(t[i])) return i;
    header_macro m;
    i = read_identifier(t, i, m.name);
    if (m.name.empty()) return i;
    if (i < t.size() && t[i] == '(') {
      defining_ = std::move(m.name);
      return parameters(t, i + 1);
    }
    // An object-like macro whose value is a header name or another macro may name a header for
    // a computed include. Its body is then lexed like any text, collected or not: a raw string
    // or a comment there hides what it would anywhere.
    i = skip_blanks(t, i);
    if (macros_ != nullptr && read_header_name(t, i, m.value) != i) {
      macros_->push_back(std::move(m));
    }
    return i;
  }

  // A newline outside a comment ends the directive it was in.
  void end_line() noexcept {
    in_define_ = false;
    in_condition_ = false;
    defining_.clear();
    frames_.clear();
  }

 private:
  struct frame {
    std::string_view callee;  // In the text; empty for a parenthesis that is no call.
    std::size_t argument = 0;
  };

  std::optional<std::size_t> parameter_index(std::string_view name) const {
    if (!parameter_map_.empty()) {
      auto const it = parameter_map_.find(name);
      if (it == parameter_map_.end()) return std::nullopt;
      return it->second;
    }
    auto const it = std::find(parameters_.begin(), parameters_.end(), name);
    if (it == parameters_.end()) return std::nullopt;
    return static_cast<std::size_t>(it - parameters_.begin());
  }

  // Records the argument starting at i of the innermost call when it is a header name, a
  // parameter of the macro being defined, or in a condition another identifier (a macro that
  // may name a header: `#if W(HEADER)`). What it holds is still lexed as any text (a
  // `<a __has_include(<b>) c>` probes b), so scanning goes on at i.
  std::size_t argument(std::string_view t, std::size_t i) {
    if (frames_.empty() || frames_.back().callee.empty()) return i;
    auto const j = skip_blanks(t, i);
    if (j >= t.size()) return i;
    auto const ends_argument = [&](std::size_t end) {
      auto const k = skip_blanks(t, end);
      return k < t.size() && (t[k] == ',' || t[k] == ')');
    };
    macro_call call;
    if (t[j] == '<') {
      // A header name in an argument holds no ',' or parenthesis (the preprocessor would split
      // or nest there), so each search stops before the next argument: linear on any line.
      auto const close = t.find_first_of(">,()\n", j + 1);
      if (close == npos || t[close] != '>' || close == j + 1 || !ends_argument(close + 1)) {
        return i;
      }
      call.header.name = t.substr(j + 1, close - j - 1);
    } else if (t[j] == '"') {
      auto const end = read_header_name(t, j, call.header);
      if (end == j || !ends_argument(end)) return i;
    } else if (is_ident(t[j]) && !is_digit(t[j]) && frames_.back().callee != "defined") {
      auto end = j;
      while (end < t.size() && is_ident(t[end])) ++end;
      if (!ends_argument(end)) return i;
      auto const name = t.substr(j, end - j);
      if (auto const p = defining_.empty() ? std::nullopt : parameter_index(name)) {
        call.macro = defining_;
        call.parameter = *p;
      } else if (in_condition_) {
        // Only in conditions: macro bodies pass identifiers to calls by the thousand (CCCL's
        // token pasting), and recording them all doubled the scan of <cuda/std/cstdint>.
        call.header.name = name;
        call.header.computed = true;
      } else {
        return i;
      }
    } else {
      return i;
    }
    call.callee = frames_.back().callee;
    call.argument = frames_.back().argument;
    calls_->push_back(std::move(call));
    return i;
  }

  // Reads a function-like macro's parameters from just after its '('; returns past the ')'.
  std::size_t parameters(std::string_view t, std::size_t i) {
    i = read_parameters(t, i);
    // Many parameters are looked up by name, not by a scan each: a line of them stays linear.
    if (parameters_.size() > 8) {
      for (std::size_t k = 0; k < parameters_.size(); ++k)
        parameter_map_.emplace(parameters_[k], k);
    }
    return i;
  }
  std::size_t read_parameters(std::string_view t, std::size_t i) {
    while (true) {
      i = skip_blanks(t, i);
      if (i >= t.size() || t[i] == '\n') return i;
      if (t[i] == ')') return i + 1;
      if (t.substr(i, 3) == "...") {
        parameters_.emplace_back("__VA_ARGS__");
        i += 3;
        continue;
      }
      std::string parameter;
      auto const end = read_identifier(t, i, parameter);
      if (end == i) {
        ++i;
      } else {
        parameters_.push_back(std::move(parameter));
        i = end;
      }
    }
  }

  std::vector<include_directive>& out_;
  std::vector<header_macro>* macros_;
  std::vector<macro_call>* calls_;
  bool in_define_ = false;
  bool in_condition_ = false;
  std::string defining_;                 // The function-like macro being defined.
  std::vector<std::string> parameters_;  // Its parameters.
  std::unordered_map<std::string_view, std::size_t> parameter_map_;  // Into parameters_.
  std::vector<frame> frames_;  // The parentheses open on this line.
  std::size_t no_angle_close_before_ = 0;
};

// The directives and macros of one reading of `original`.
void lex(logical_text const& lt, std::vector<include_directive>& out,
         std::vector<header_macro>* macros, std::vector<macro_call>* calls) {
  std::string_view const t = lt.text();
  lexer lex(out, macros, calls);
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
      if (id == "__has_include" || id == "__has_include_next") {
        i = lex.probe(t, i, id.size() > 13);
        continue;
      }
      if (lex.in_expression()) {
        if (auto const j = skip_blanks(t, i); j < t.size() && t[j] == '(') {
          i = lex.open(t, j, id);
          continue;
        }
      }
      bool const raw = id == "R" || id == "u8R" || id == "uR" || id == "UR" || id == "LR";
      if (raw && i < t.size() && t[i] == '"') i = skip_raw_string(lt, i);
      continue;
    }
    switch (c) {
      case '\n':
        line_start = true;
        lex.end_line();
        ++i;
        break;
      case ' ':
      case '\t':
      case '\r':
      case '\v':
      case '\f':
        ++i;
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
        i = line_start ? lex.directive(t, i + 1) : i + 1;
        line_start = false;
        break;
      case '%':  // "%:" is the digraph of '#'.
        i = line_start && t.substr(i, 2) == "%:" ? lex.directive(t, i + 2) : i + 1;
        line_start = false;
        break;
      case '"':
      case '\'':
        i = skip_literal(t, i);
        line_start = false;
        break;
      case '(':
        i = lex.in_expression() ? lex.open(t, i, {}) : i + 1;
        line_start = false;
        break;
      case ',':
        i = lex.in_expression() ? lex.comma(t, i) : i + 1;
        line_start = false;
        break;
      case ')':
        lex.close();
        ++i;
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
}

// Whether `t` may spell `word` (outside comments or not): it does, or a line splice or a
// trigraph backslash may cut it. A text with none, as most kernels are, costs a search or two
// (glibc's memmem: 2-5 times faster than string_view::find here) instead of the lexer.
bool may_hold(std::string_view t, std::string_view word) {
  auto const has = [t](std::string_view w) {
    return ::memmem(t.data(), t.size(), w.data(), w.size()) != nullptr;
  };
  return t.size() >= word.size() && (has(word) || has("\\\n") || has("\\\r\n") || has("?\?/"));
}

// Whether `t` holds a trigraph, which NVRTC replaces under -std=c++03/11/14 (not C++17, its
// default).
bool has_trigraph(std::string_view t) {
  for (auto p = t.find("??"); p != npos && p + 2 < t.size(); p = t.find("??", p + 1)) {
    if (std::string_view("=/'()!<>-").find(t[p + 2]) != npos) return true;
  }
  return false;
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

// The macros `-D NAME=value` / `--define-macro NAME=value` options give a header name or
// another macro's name.
std::vector<header_macro> defined_macros(std::span<std::string const> options) {
  std::vector<header_macro> out;
  for (auto const v : option_values(options, "-D", true, "--define-macro")) {
    auto const eq = v.find('=');
    if (eq == npos || v.substr(0, eq).find('(') != npos) continue;
    header_macro m{std::string(v.substr(0, eq)), {}};
    auto const value = v.substr(eq + 1);
    if (read_header_name(value, 0, m.value) != 0) out.push_back(std::move(m));
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
                              c.header.computed, from.native())
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
  // (callee, argument, header, quoted, computed, directory): each call is followed once.
  std::set<std::tuple<std::string, std::size_t, std::string, bool, bool, std::string>>
      wrapped_seen_;
  std::set<std::tuple<std::size_t, std::string, bool>> expanded_;  // (computed_ index, value)
  XXH3_state_t state_{};
  include_scan result_;
};

}  // namespace

std::vector<include_directive> find_includes(std::string_view t, std::vector<header_macro>* macros,
                                             std::vector<macro_call>* calls) {
  std::vector<include_directive> out;
  // A wrapped probe needs neither word: `#if HAS(<x.h>)` with HAS defined elsewhere.
  if (!may_hold(t, "include") && (macros == nullptr || !may_hold(t, "define")) &&
      (calls == nullptr || (!may_hold(t, "if") && !may_hold(t, "define")))) {
    return out;
  }
  std::size_t const first_macro = macros == nullptr ? 0 : macros->size();
  std::size_t const first_call = calls == nullptr ? 0 : calls->size();
  lex(logical_text(t, false), out, macros, calls);
  if (!has_trigraph(t)) return out;
  // Which reading NVRTC takes depends on -std: both are reported, the second's new ones after.
  std::vector<include_directive> more;
  std::vector<header_macro> more_macros;
  std::vector<macro_call> more_calls;
  lex(logical_text(t, true), more, macros == nullptr ? nullptr : &more_macros,
      calls == nullptr ? nullptr : &more_calls);
  auto const key = [](include_directive const& d) {
    return std::tuple(d.name, d.quoted, d.next, d.probe, d.computed);
  };
  std::set<decltype(key(out.front()))> seen;
  for (auto const& d : out) seen.insert(key(d));
  for (auto& d : more) {
    if (seen.insert(key(d)).second) out.push_back(std::move(d));
  }
  if (macros != nullptr) {
    std::set<std::pair<std::string, decltype(key(out.front()))>> known;
    for (auto i = first_macro; i < macros->size(); ++i) {
      known.emplace((*macros)[i].name, key((*macros)[i].value));
    }
    for (auto& m : more_macros) {
      if (known.emplace(m.name, key(m.value)).second) macros->push_back(std::move(m));
    }
  }
  if (calls != nullptr) {
    auto const call_key = [&key](macro_call const& c) {
      return std::tuple(c.callee, c.argument, key(c.header), c.macro, c.parameter);
    };
    std::set<decltype(call_key(calls->front()))> known;
    for (auto i = first_call; i < calls->size(); ++i) known.insert(call_key((*calls)[i]));
    for (auto& c : more_calls) {
      if (known.insert(call_key(c)).second) calls->push_back(std::move(c));
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
  auto defined_wrappers = defined_calls(options);
  // Most kernels: one search for "include". The source's macros matter only with a header, its
  // macro calls only with a wrapper of `__has_include` (whose definition spells "include").
  if (pre.empty() && defined_wrappers.empty() && !may_hold(source, "include")) return {};
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
  walker.add_calls(std::move(defined_wrappers), source_dir);
  walker.add_calls(std::move(calls), source_dir);
  for (auto const name : pre) walker.follow({std::string(name), true}, source_dir);
  for (auto const& d : includes) walker.follow(d, source_dir);
  return std::move(walker).run();
}

}  // namespace cubert::cuda::detail
