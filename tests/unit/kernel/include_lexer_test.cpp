// SPDX-License-Identifier: Apache-2.0
// The include lexer behind the include scan: one text's include directives, header-naming
// macros and probe-wrapping macro calls, read as the preprocessor reads them. No files.
#include "kernel/include_lexer.hpp"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace {

using cubert::detail::find_includes;
using cubert::detail::header_macro;
using cubert::detail::include_directive;
using cubert::detail::macro_call;

// "q:" quoted, "a:" angle, "m:" named by a macro; a probe adds "p", an include_next "n".
std::vector<std::string> names(std::string_view text) {
  std::vector<std::string> out;
  for (auto const& d : find_includes(text)) {
    std::string const kind = d.computed ? "m" : d.quoted ? "q" : "a";
    out.push_back(kind + (d.probe ? "p" : "") + (d.next ? "n" : "") + ":" + d.name);
  }
  return out;
}

using strings = std::vector<std::string>;

TEST(IncludeLexerTest, FindsQuotedAndAngleIncludesWithAnySpacing) {
  EXPECT_EQ(names("#include \"a.h\"\n#include <b.h>\n  #  include   \"c/d.h\"\n"
                  "#\tinclude<e.h> // trailing\n#include \"f.h\""),
            (strings{"q:a.h", "a:b.h", "q:c/d.h", "a:e.h", "q:f.h"}));
  EXPECT_EQ(find_includes("#include <x.h>"), (std::vector<include_directive>{{"x.h", false}}));
  // A block comment is a space, also between '#' and the directive's name.
  EXPECT_EQ(names("/* lead */ #/**/include /* x */ \"g.h\"\n"), (strings{"q:g.h"}));
  // A line splice continues the directive.
  EXPECT_EQ(names("#include \\\n  \"h.h\"\n"), (strings{"q:h.h"}));
}

TEST(IncludeLexerTest, AByteOrderMarkDoesNotHideAFirstLineDirective) {
  // Editors on Windows save headers with a UTF-8 BOM; the preprocessor ignores it, so the
  // directive on the first line is real and its header belongs in the key.
  EXPECT_EQ(names("\xEF\xBB\xBF#include \"a.h\"\n#include <b.h>\n"), (strings{"q:a.h", "a:b.h"}));
}

TEST(IncludeLexerTest, TheDigraphOfTheHashStartsADirectiveToo) {
  // "%:" is '#' spelt as a digraph, which NVRTC accepts: its includes belong in the key.
  EXPECT_EQ(names("%:include \"a.h\"\n  %: include <b.h>\nint x; %:include \"no.h\"\n"),
            (strings{"q:a.h", "a:b.h"}));
}

TEST(IncludeLexerTest, ASpliceInsideTheDirectivesNameIsJoined) {
  EXPECT_EQ(names("#inc\\\nlude \"a.h\"\n#include_\\\r\nnext <b.h>\n#inc\\ lude \"no.h\"\n"),
            (strings{"q:a.h", "an:b.h"}));
  // And inside the header's name.
  EXPECT_EQ(names("#include \"a\\\n.h\"\n#include <b\\\r\n.h>\n"), (strings{"q:a.h", "a:b.h"}));
  // Also where nothing else in the text spells "include".
  EXPECT_EQ(names("#inc\\\nlude \"a.h\"\n"), (strings{"q:a.h"}));
  EXPECT_EQ(names("#inc\\\r\nlude \"a.h\"\n"), (strings{"q:a.h"}));
}

TEST(IncludeLexerTest, ALineCommentEndingInASpliceTakesTheNextLine) {
  // Lines are spliced before comments are removed: the "#include" continues the comment.
  EXPECT_EQ(names("// note \\\n#include \"in_comment.h\"\n#include \"real.h\"\n"),
            (strings{"q:real.h"}));
  EXPECT_EQ(names("// note \\\r\n#include \"in_comment.h\"\r\n#include \"real.h\"\r\n"),
            (strings{"q:real.h"}));
  // The spliced "/*" is inside the comment, so it must not hide the real directive after it.
  EXPECT_EQ(names("// old \\\n/* disabled\n#include \"real.h\"\n// */\n"), (strings{"q:real.h"}));
}

TEST(IncludeLexerTest, SkipsCommentsLiteralsAndOtherDirectives) {
  constexpr char const* text = R"src(
// #include "line_comment.h"
/* #include "block_comment.h" */
/* a comment
#include "inside_multiline_comment.h"
*/
const char* s = "/*"; char q = '"';
#include "after_literals.h"
const char* r = R"x(
#include "inside_raw_string.h"
)x";
int n = 1'000'000;
#include "after_digit_separator.h"
x = 1; #include "not_at_line_start.h"
#define HEADER "macro.h"
#include HEADER
#includefoo "not_include.h"
#error don't
#include <after_error.h>
#include "unterminated.h
#include <unterminated.h
#include ""
)src";
  EXPECT_EQ(names(text), (strings{"q:after_literals.h", "q:after_digit_separator.h", "m:HEADER",
                                  "a:after_error.h"}));
}

TEST(IncludeLexerTest, ProbesAndMacroNamedHeadersAreReported) {
  constexpr char const* text = R"src(
#if __has_include("config.h") && __has_include( <cuda/std/cstdint> )
#elif defined(__has_include) || __has_include_next(<next.h>)
#endif
#if __has_include(CONFIG_HEADER) // the macro is reported, for the scan to expand
#endif
#include_next KERNEL_HEADER
// __has_include("in_comment.h")
const char* s = "__has_include("in_literal.h")";
#include 1
#define HAS(x) __has_include(x) /* a wrapper: its operand is a parameter; not so
   */ && __has_include(<in_define.h>)
#define HAS2(x) \
  __has_include(x)
#if HAS(<used.h>) // what a wrapper probes is not followed
#include "after_define.h"
#endif
)src";
  EXPECT_EQ(names(text),
            (strings{"qp:config.h", "ap:cuda/std/cstdint", "apn:next.h", "mp:CONFIG_HEADER",
                     "mn:KERNEL_HEADER", "ap:in_define.h", "q:after_define.h"}));
}

TEST(IncludeLexerTest, CollectsObjectLikeMacrosThatMayNameAHeader) {
  std::vector<header_macro> macros;
  auto const includes = find_includes(R"src(
#define QUOTED "q.h"
#  define ANGLE <dir/a.h>
#define ALIAS QUOTED
#define FUNCTION(x) "f.h"
#define NUMBER 1
#define EMPTY
// #define IN_COMMENT "c.h"
)src",
                                      &macros);
  EXPECT_TRUE(includes.empty());
  EXPECT_EQ(macros, (std::vector<header_macro>{{"QUOTED", {"q.h", true}},
                                               {"ANGLE", {"dir/a.h", false}},
                                               {"ALIAS", {.name = "QUOTED", .computed = true}}}));
  // Without "include" in it, a text is lexed only when its macros are wanted.
  std::vector<header_macro> more;
  EXPECT_TRUE(find_includes("#define H \"h.h\"\n", &more).empty());
  EXPECT_EQ(more.size(), 1U);
}

TEST(IncludeLexerTest, MacroCallsThatMayWrapAProbeAreReported) {
  constexpr char const* text =
      "#define HAS(x) __has_include(x)\n"
      "#define HAS2(a, y) HAS(y) && f(a) && HAS(<fixed.h>)\n"
      "#if HAS(<a.h>) && (HAS2(1, \"b.h\") || defined(X)) || g(<c.h> + 1)\n"
      "#elif HAS ( /* c */ <d.h> ) || __has_include(<p.h>) && HAS(\"e.h\")\n"
      "#endif\n"
      "int f(<no.h>);\n";
  std::vector<macro_call> calls;
  auto const directives = find_includes(text, nullptr, &calls);
  EXPECT_EQ(directives, find_includes(text));
  EXPECT_EQ(names(text), (strings{"ap:p.h"}));
  // Built field by field: g++ 12 at -O3 warns of nested designated initialisers here (falsely).
  auto const passes = [](std::string callee, std::string macro, std::size_t parameter) {
    macro_call c;
    c.callee = std::move(callee);
    c.macro = std::move(macro);
    c.parameter = parameter;
    return c;
  };
  auto const uses = [](std::string callee, std::size_t argument, std::string name, bool quoted) {
    macro_call c;
    c.callee = std::move(callee);
    c.argument = argument;
    c.header.name = std::move(name);
    c.header.quoted = quoted;
    return c;
  };
  EXPECT_EQ(calls, (std::vector<macro_call>{
                       passes("__has_include", "HAS", 0),
                       passes("HAS", "HAS2", 1),
                       passes("f", "HAS2", 0),
                       uses("HAS", 0, "fixed.h", false),
                       uses("HAS", 0, "a.h", false),
                       uses("HAS2", 1, "b.h", true),
                       uses("HAS", 0, "d.h", false),
                       uses("HAS", 0, "e.h", true),
                   }));
}

}  // namespace
