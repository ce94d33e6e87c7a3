// SPDX-License-Identifier: Apache-2.0
#include "kernel/include_lexer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace cubert::detail {
namespace {

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
// Whether `t` holds a trigraph, which NVRTC replaces under -std=c++03/11/14 (not C++17, its
// default).
bool has_trigraph(std::string_view t) {
  for (auto p = t.find("??"); p != npos && p + 2 < t.size(); p = t.find("??", p + 1)) {
    if (std::string_view("=/'()!<>-").find(t[p + 2]) != npos) return true;
  }
  return false;
}

}  // namespace

// A text with none of them, as most kernels are, costs a search or two (glibc's memmem: 2-5
// times faster than string_view::find here) instead of the lexer.
bool may_hold(std::string_view t, std::string_view word) {
  auto const has = [t](std::string_view w) {
    return ::memmem(t.data(), t.size(), w.data(), w.size()) != nullptr;
  };
  return t.size() >= word.size() && (has(word) || has("\\\n") || has("\\\r\n") || has("?\?/"));
}

std::optional<include_directive> header_value(std::string_view value) {
  include_directive d;
  if (read_header_name(value, 0, d) == 0) return std::nullopt;
  return d;
}

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

}  // namespace cubert::detail
