// SPDX-License-Identifier: Apache-2.0
// The include scanner behind the kernel disk cache's key: no GPU, no NVRTC.
#include "kernel/include_scan.hpp"

#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using cubert::detail::find_includes;
using cubert::detail::header_macro;
using cubert::detail::include_dirs;
using cubert::detail::include_scan;
using cubert::detail::macro_call;
using cubert::detail::scan_includes;

using cubert::test::temp_dir;

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
using paths = std::vector<fs::path>;

TEST(IncludeScanTest, ReadsEveryIncludeDirectoryOptionForm) {
  strings const options{
      "-Ia",  "-I",    "b", "--include-path=c", "--use_fast_math", "--include-path", "d",
      "-I=e", "-DX=1", "-I"};
  EXPECT_EQ(include_dirs(options), (paths{"a", "b", "c", "d", "e"}));
  EXPECT_TRUE(include_dirs(strings{"-DI=1", "-include", "x.h"}).empty());
}

TEST(IncludeScanTest, ResolvesAgainstIncludeDirectoriesInOrder) {
  temp_dir d;
  auto const first = d.write("one/x.h", "first");
  d.write("two/x.h", "second");
  auto const y = d.write("two/y.h", "y");
  strings const options{"-I" + (d.path() / "one").string(), "-I", (d.path() / "two").string()};
  auto const scan = scan_includes("#include <x.h>\n#include \"y.h\"\n", "k.cu", options);
  EXPECT_EQ(scan.files, (paths{first, y}));
  EXPECT_EQ(scan.digest.size(), 32U);
  EXPECT_FALSE(scan.truncated);
}

TEST(IncludeScanTest, NestedQuotedIncludesLookInTheHeadersDirectoryFirst) {
  temp_dir d;
  auto const a = d.write("inc/a.h", "#include \"sub/b.h\"\n");
  auto const b = d.write("inc/sub/b.h", "#include \"c.h\"\n#include <d.h>\n");
  auto const c = d.write("inc/sub/c.h", "next to b");
  d.write("inc/c.h", "in the include directory");
  d.write("inc/sub/d.h", "angle includes do not look next to b");
  auto const dh = d.write("inc/d.h", "d");
  auto const scan = scan_includes("#include \"a.h\"\n", "k.cu",
                                  strings{"--include-path", (d.path() / "inc").string()});
  EXPECT_EQ(scan.files, (paths{a, b, c, dh}));
}

TEST(IncludeScanTest, SourceQuotedIncludesLookNextToTheSourceName) {
  temp_dir d;
  auto const m = d.write("src/m.h", "m");
  d.write("src/n.h", "n");
  auto const scan =
      scan_includes("#include \"m.h\"\n#include <n.h>\n", (d.path() / "src/k.cu").string(), {});
  EXPECT_EQ(scan.files, (paths{m}));
}

TEST(IncludeScanTest, RelativeIncludeDirectoriesAreFromTheWorkingDirectory) {
  temp_dir d;
  auto const h = d.write("rel/h.h", "h");
  auto const relative = fs::relative(d.path() / "rel", fs::current_path());
  ASSERT_TRUE(relative.is_relative());
  auto const scan = scan_includes("#include <h.h>\n", "k.cu", strings{"-I" + relative.string()});
  EXPECT_EQ(scan.files, (paths{h}));
}

TEST(IncludeScanTest, PreIncludedHeadersAreFollowed) {
  temp_dir d;
  auto const p = d.write("inc/p.h", "#include \"q.h\"\n");
  auto const q = d.write("inc/q.h", "q");
  auto const scan = scan_includes("int x;\n", "k.cu",
                                  strings{"-include", "p.h", "-I" + (d.path() / "inc").string()});
  EXPECT_EQ(scan.files, (paths{p, q}));
  EXPECT_EQ(
      scan_includes("", "k.cu", strings{"--pre-include=p.h", "-I" + (d.path() / "inc").string()})
          .files,
      (paths{p, q}));
}

// NVRTC looks for a pre-include in the working directory, then in -I: never next to the source,
// and -no-source-include does not change that. Hashing another file than the one compiled gave
// stale disk-cache hits after an edit.
TEST(IncludeScanTest, PreIncludesAreLookedForInTheWorkingDirectoryThenInclude) {
  temp_dir d;
  auto const old_cwd = fs::current_path();
  fs::current_path(d.path());
  auto const here = d.write("cfg.h", "#define V 1\n");
  auto const in_sub = d.write("sub/cfg.h", "x");
  auto const in_inc = d.write("inc/cfg.h", "y");
  auto const inc = "-I" + (d.path() / "inc").string();
  auto const no_source =
      scan_includes("int x;\n", "k.cu", strings{"-no-source-include", "-include", "cfg.h"});
  auto const beside = scan_includes("", "sub/k.cu", strings{"-include", "cfg.h", inc});
  fs::remove(here);
  auto const then_inc = scan_includes("", "sub/k.cu", strings{"-include", "cfg.h", inc});
  fs::current_path(old_cwd);
  EXPECT_EQ(no_source.files, (paths{here}));
  EXPECT_EQ(beside.files, (paths{here}));
  EXPECT_EQ(then_inc.files, (paths{in_inc}));
  (void)in_sub;
}

TEST(IncludeScanTest, CyclesAreFollowedOnce) {
  temp_dir d;
  auto const a = d.write("a.h", "#pragma once\n#include \"b.h\"\n#include \"a.h\"\n");
  auto const b = d.write("b.h", "#include \"a.h\"\n#include \"./b.h\"\n");
  auto const scan = scan_includes("#include \"a.h\"\n#include <b.h>\n", "k.cu",
                                  strings{"-I" + d.path().string()});
  EXPECT_EQ(scan.files, (paths{a, b}));
}

TEST(IncludeScanTest, MissingHeadersAndNoIncludesGiveAnEmptyDigest) {
  temp_dir d;
  auto const scan = scan_includes("#include <cuda_fp16.h>\n#include \"nowhere.h\"\n", "k.cu",
                                  strings{"-I" + d.path().string()});
  EXPECT_TRUE(scan.files.empty());
  EXPECT_TRUE(scan.digest.empty());
  EXPECT_TRUE(scan_includes("__global__ void k() {}", "k.cu", {}).digest.empty());
}

TEST(IncludeScanTest, DigestFollowsHeaderContents) {
  temp_dir d;
  d.write("inc/a.h", "#include \"b.h\"\n");
  d.write("inc/b.h", "#define V 1\n");
  strings const options{"-I" + (d.path() / "inc").string()};
  auto const before = scan_includes("#include \"a.h\"\n", "k.cu", options).digest;
  EXPECT_EQ(before, scan_includes("#include \"a.h\"\n", "k.cu", options).digest);
  d.write("inc/b.h", "#define V 2\n");
  auto const after = scan_includes("#include \"a.h\"\n", "k.cu", options).digest;
  EXPECT_NE(before, after);
  // A header appearing earlier in the search changes it too.
  d.write("first/b.h", "#define V 2\n");
  strings const shadowed{"-I" + (d.path() / "first").string(), options[0]};
  EXPECT_NE(after, scan_includes("#include \"a.h\"\n#include <b.h>\n", "k.cu", shadowed).digest);
}

TEST(IncludeScanTest, IncludeNextReachesTheSameNameFurtherDownTheSearch) {
  // A wrapper header that adds to the one it shadows: editing the shadowed header must miss.
  temp_dir d;
  auto const wrapper = d.write("wrap/h.h", "#include_next <h.h>\n#define W 1\n");
  auto const real = d.write("real/h.h", "#define V 1\n");
  strings const options{"-I" + (d.path() / "wrap").string(), "-I" + (d.path() / "real").string()};
  auto const before = scan_includes("#include <h.h>\n", "k.cu", options);
  EXPECT_EQ(before.files, (paths{wrapper, real}));
  d.write("real/h.h", "#define V 2\n");
  EXPECT_NE(before.digest, scan_includes("#include <h.h>\n", "k.cu", options).digest);
}

TEST(IncludeScanTest, AComputedIncludeFollowsItsMacrosValuesWhereverDefined) {
  temp_dir d;
  auto const config = d.write("inc/config.h", "#define VALUE_HEADER VALUE_HEADER_2\n");
  auto const value = d.write("inc/detail/value.h", "#define V 1\n");
  auto const other = d.write("inc/other.h", "#define W 1\n");
  strings const options{"-I" + (d.path() / "inc").string()};
  // Defined in a header the walk reaches after the include that uses it, through an alias
  // defined in the source.
  constexpr char const* source =
      "#include \"config.h\"\n#define VALUE_HEADER_2 \"detail/value.h\"\n"
      "#include VALUE_HEADER\n";
  auto const before = scan_includes(source, "k.cu", options);
  EXPECT_FALSE(before.computed);
  EXPECT_EQ(before.files, (paths{config, value}));
  d.write("inc/detail/value.h", "#define V 2\n");
  EXPECT_NE(before.digest, scan_includes(source, "k.cu", options).digest);
  // A -D option gives a value too; every value is followed.
  strings with_option = options;
  with_option.push_back("-DVALUE_HEADER=<other.h>");
  EXPECT_EQ(scan_includes(source, "k.cu", with_option).files, (paths{config, other, value}));
  EXPECT_EQ(
      scan_includes("#include H\n", "k.cu", strings{options[0], "--define-macro=H=\"other.h\""})
          .files,
      (paths{other}));
}

TEST(IncludeScanTest, AComputedIncludeWithNoVisibleValueMarksTheScan) {
  temp_dir d;
  d.write("inc/value.h", "#define V 1\n");
  strings const options{"-I" + (d.path() / "inc").string()};
  // A function-like macro (stringizing) or one defined nowhere the scan looks.
  EXPECT_TRUE(
      scan_includes("#define STR(x) #x\n#include STR(value.h)\n", "k.cu", options).computed);
  EXPECT_TRUE(scan_includes("#if __has_include(ELSEWHERE)\n#endif\n", "k.cu", options).computed);
  // A value naming a header found nowhere is like any missing include: nothing to cover.
  include_scan const builtin =
      scan_includes("#define H <cuda_fp16.h>\n#include H\n", "k.cu", options);
  EXPECT_FALSE(builtin.computed);
  EXPECT_TRUE(builtin.files.empty());
  EXPECT_FALSE(scan_includes("#include \"value.h\"\n", "k.cu", options).computed);
}

TEST(IncludeScanTest, AProbeThatFindsNothingIsPartOfTheDigest) {
  temp_dir d;
  strings const options{"-I" + (d.path() / "inc").string()};
  fs::create_directories(d.path() / "inc");
  constexpr char const* source = "#if __has_include(\"extra.h\")\n#include \"extra.h\"\n#endif\n";
  auto const absent = scan_includes(source, "k.cu", options);
  EXPECT_TRUE(absent.files.empty());
  EXPECT_EQ(absent.digest.size(), 32U);
  EXPECT_EQ(absent.digest, scan_includes(source, "k.cu", options).digest);
  EXPECT_NE(absent.digest,
            scan_includes("#if __has_include(<extra.h>)\n#endif\n", "k.cu", options).digest);
  auto const extra = d.write("inc/extra.h", "#define EXTRA 2\n");
  auto const present = scan_includes(source, "k.cu", options);
  EXPECT_EQ(present.files, (paths{extra}));
  EXPECT_NE(absent.digest, present.digest);
}

TEST(IncludeScanTest, LimitsStopTheScan) {
  temp_dir d;
  for (int i = 0; i < 10; ++i) {
    d.write("h" + std::to_string(i) + ".h",
            "#include \"h" + std::to_string(i + 1) + ".h\"\n" + std::string(100, 'x'));
  }
  strings const options{"-I" + d.path().string()};
  auto const few = scan_includes("#include \"h0.h\"\n", "k.cu", options, {.max_files = 3});
  EXPECT_TRUE(few.truncated);
  EXPECT_EQ(few.files.size(), 3U);
  EXPECT_EQ(few.digest.size(), 32U);
  auto const small = scan_includes("#include \"h0.h\"\n", "k.cu", options, {.max_bytes = 500});
  EXPECT_TRUE(small.truncated);
  EXPECT_EQ(small.files.size(), 4U);
  auto const all = scan_includes("#include \"h0.h\"\n", "k.cu", options);
  EXPECT_FALSE(all.truncated);
  EXPECT_EQ(all.files.size(), 10U);
}

TEST(IncludeScanTest, LineSplicesAreJoinedBeforeCommentsAndLiteralsAreSeen) {
  // A block comment closed by a spliced "*/" ends there: the directive after it is real.
  EXPECT_EQ(names("/* c *\\\n/\n#include \"a.h\"\n/* */\n"), (strings{"q:a.h"}));
  // "/" spliced to "/" is a line comment, ending with its line: its "/*" opens nothing.
  EXPECT_EQ(names("/\\\n/ c /*\n#include \"a.h\"\n// */\n"), (strings{"q:a.h"}));
  // A literal continued by a CRLF splice: its "/*" opens nothing.
  EXPECT_EQ(names("const char* s = \"abc\\\r\n/* \";\n#include \"a.h\"\n// */\n"),
            (strings{"q:a.h"}));
  // A raw string whose prefix a splice cuts is still one: its "/*" opens nothing.
  EXPECT_EQ(names("auto s = R\\\n\"x(\n/* )x\";\n#include \"a.h\"\n// */\n"), (strings{"q:a.h"}));
  // Spliced identifiers: a probe, a digraph, a computed include's macro.
  EXPECT_EQ(names("#if __has_incl\\\nude(\"p.h\")\n#endif\n%\\\n:include \"d.h\"\n"
                  "#include HEA\\\nDER\n"),
            (strings{"qp:p.h", "q:d.h", "m:HEADER"}));
  // Splicing is one pass: a backslash left before a newline by a splice splices nothing.
  EXPECT_EQ(names("// c \\\\\n\n#include \"a.h\"\n"), (strings{"q:a.h"}));
}

TEST(IncludeScanTest, TrigraphsAreReadBothWays) {
  // NVRTC honours trigraphs under -std=c++03/11/14 and ignores them under C++17 (its default):
  // the directives of either reading are reported.
  EXPECT_EQ(names("?\?=include \"a.h\"\n// c ?\?/\n#include \"b.h\"\n#inc?\?/\nlude <c.h>\n"),
            (strings{"q:b.h", "q:a.h", "a:c.h"}));
  std::vector<header_macro> macros;
  (void)find_includes("?\?=define H \"h.h\"\n", &macros);
  EXPECT_EQ(macros, (std::vector<header_macro>{{"H", {"h.h", true}}}));
}

TEST(IncludeScanTest, AProbeInAMacrosBodyIsReportedUnlessItsOperandIsAParameter) {
  // `#define HAS_CFG __has_include("cfg.h")` then `#if HAS_CFG`: the probe's answer matters.
  EXPECT_EQ(names("#define HAS_CFG __has_include(\"cfg.h\")\n"
                  "#define HAS(x, ...) __has_include(x) || __has_include(<f.h>) || "
                  "__has_include(__VA_ARGS__) || __has_include(OTHER)\n"),
            (strings{"qp:cfg.h", "ap:f.h", "mp:OTHER"}));
  temp_dir d;
  fs::create_directories(d.path() / "inc");
  strings const options{"-I" + (d.path() / "inc").string()};
  constexpr char const* source = "#define HAS_CFG __has_include(<cfg.h>)\n#if HAS_CFG\n#endif\n";
  auto const absent = scan_includes(source, "k.cu", options);
  d.write("inc/cfg.h", "#define CFG 1\n");
  EXPECT_NE(absent.digest, scan_includes(source, "k.cu", options).digest);
}

TEST(IncludeScanTest, AMacrosBodyIsLexedLikeAnyText) {
  // A raw string in a macro's body hides what it holds, whether or not macros are collected.
  constexpr char const* text = "#define X R\"x(\n/* )x\"\n#include \"a.h\"\n// */\n";
  std::vector<header_macro> macros;
  EXPECT_EQ(find_includes(text, &macros), find_includes(text));
  EXPECT_EQ(names(text), (strings{"q:a.h"}));
  // A name that is not an identifier defines nothing.
  std::vector<header_macro> none;
  EXPECT_TRUE(find_includes("#define 1X \"a.h\"\n", &none).empty());
  EXPECT_TRUE(none.empty());
}

TEST(IncludeScanTest, IncludeNextInTheSourceIsAnInclude) {
  // NVRTC warns and treats it as #include: a quoted one finds the header next to the source.
  temp_dir d;
  auto const near = d.write("src/n.h", "#define N 1\n");
  auto const far = d.write("inc/n.h", "#define N 2\n");
  auto const scan = scan_includes("#include_next \"n.h\"\n", (d.path() / "src/k.cu").string(),
                                  strings{"-I" + (d.path() / "inc").string()});
  EXPECT_EQ(scan.files, (paths{near, far}));
}

// With --no-source-include NVRTC does not look next to the source: the scan hashed the header
// there instead of the one compiled, and an edit of that one hit the stale cache entry.
TEST(IncludeScanTest, NoSourceIncludeKeepsTheSourcesDirectoryOutOfTheSearch) {
  temp_dir d;
  auto const near = d.write("src/cfg.h", "#define N 1\n");
  auto const far = d.write("inc/cfg.h", "#define N 2\n");
  auto const source_name = (d.path() / "src/k.cu").string();
  auto const inc = "-I" + (d.path() / "inc").string();
  EXPECT_EQ(scan_includes("#include \"cfg.h\"\n", source_name, strings{inc}).files, paths{near});
  for (char const* flag : {"-no-source-include", "--no-source-include"}) {
    EXPECT_EQ(scan_includes("#include \"cfg.h\"\n", source_name, strings{flag, inc}).files,
              paths{far})
        << flag;
    EXPECT_EQ(
        scan_includes("#if __has_include(\"cfg.h\")\n#endif\n", source_name, strings{flag, inc})
            .files,
        paths{far})
        << flag;
    // A computed include's quoted value too (it looked next to the source, as if searched).
    EXPECT_EQ(
        scan_includes("#define H \"cfg.h\"\n#include H\n", source_name, strings{flag, inc}).files,
        paths{far})
        << flag;
  }
  EXPECT_EQ(scan_includes("#define H \"cfg.h\"\n#include H\n", source_name, strings{inc}).files,
            paths{near});
}

// An alias of __has_include given by a -D option, in a source that never spells "include": the
// scan stopped at its first look and the probed header stayed out of the key.
TEST(IncludeScanTest, AProbeAliasFromADefineOptionIsFollowed) {
  temp_dir d;
  fs::create_directories(d.path() / "inc");
  strings const options{"-DHAS=__has_include", "-I" + (d.path() / "inc").string()};
  auto const source = "#if HAS(<x.h>)\n#endif\n";
  auto const before = scan_includes(source, "k.cu", options).digest;
  EXPECT_FALSE(before.empty());
  auto const header = d.write("inc/x.h", "");
  auto const after = scan_includes(source, "k.cu", options);
  EXPECT_NE(before, after.digest);
  EXPECT_EQ(after.files, paths{header});
}

TEST(IncludeScanTest, AComputedIncludeWithAValueOfUnknownHeaderMarksTheScan) {
  // One value is known, but the other names a function-like macro: which header it gives is
  // unknown, so the key would miss it.
  temp_dir d;
  d.write("inc/a.h", "#define A 1\n");
  strings const options{"-I" + (d.path() / "inc").string()};
  auto const scan = scan_includes(
      "#ifdef USE_A\n#define H \"a.h\"\n#else\n#define H STR(b.h)\n#endif\n#include H\n", "k.cu",
      options);
  EXPECT_TRUE(scan.computed);
  // An alias of an alias defined nowhere is as unknown.
  EXPECT_TRUE(
      scan_includes("#define H \"a.h\"\n#define H G\n#define G F\n#include H\n", "k.cu", options)
          .computed);
  // A cycle names nothing (it does not compile), beside a known value.
  EXPECT_FALSE(
      scan_includes("#define H \"a.h\"\n#define H G\n#define G H\n#include H\n", "k.cu", options)
          .computed);
}

TEST(IncludeScanTest, ACallOfAProbeWrapperIsFollowedAsAProbe) {
  // CCCL probes through `_CCCL_HAS_INCLUDE(<x>)`, defined in one header and used in others: the
  // header appearing later must change the key even where nothing includes it.
  temp_dir d;
  fs::create_directories(d.path() / "inc");
  d.write("inc/pp.h",
          "#if defined(__has_include)\n#define MY_HAS_INCLUDE(_X) __has_include(_X)\n#else\n"
          "#define MY_HAS_INCLUDE(_X) 0\n#endif\n#define MY_HAS(a, b) MY_HAS_INCLUDE(b)\n");
  d.write("inc/top.h",
          "#include <pp.h>\n#if MY_HAS_INCLUDE(<opt/extra.h>)\n#define HAVE_EXTRA 1\n#endif\n"
          "#if MY_HAS(0, \"local.h\")\n#endif\n");
  strings const options{"-I" + (d.path() / "inc").string()};
  auto const scan = [&] { return scan_includes("#include <top.h>\n", "k.cu", options); };
  auto const absent = scan();
  EXPECT_EQ(absent.files.size(), 2U);
  EXPECT_FALSE(absent.computed);
  auto const extra = d.write("inc/opt/extra.h", "#define EXTRA 1\n");
  auto const present = scan();
  EXPECT_EQ(present.files.back(), fs::canonical(extra));
  EXPECT_NE(absent.digest, present.digest);
  // Through a macro passing its second parameter on; a quoted probe looks next to its header.
  auto const local = d.write("inc/local.h", "#define LOCAL 1\n");
  auto const both = scan();
  EXPECT_NE(present.digest, both.digest);
  EXPECT_EQ(both.files.size(), 4U);
  EXPECT_NE(std::find(both.files.begin(), both.files.end(), fs::canonical(local)),
            both.files.end());
}

TEST(IncludeScanTest, AProbeWrapperFromADefineOptionIsFollowed) {
  temp_dir d;
  fs::create_directories(d.path() / "inc");
  strings const options{"-I" + (d.path() / "inc").string(), "-DHAS(x)=__has_include(x)",
                        "--define-macro", "HAS_NEXT(x)=__has_include_next(x)"};
  // The source spells neither "include" nor "define".
  constexpr char const* source = "#if HAS(\"cfg.h\") || HAS_NEXT(<nx.h>)\n#endif\n";
  auto const absent = scan_includes(source, "k.cu", options);
  EXPECT_EQ(absent.digest.size(), 32U);
  EXPECT_TRUE(absent.files.empty());
  auto const cfg = d.write("inc/cfg.h", "#define CFG 1\n");
  auto const present = scan_includes(source, "k.cu", options);
  EXPECT_EQ(present.files, (paths{cfg}));
  EXPECT_NE(absent.digest, present.digest);
  auto const nx = d.write("inc/nx.h", "#define NX 1\n");
  EXPECT_EQ(scan_includes(source, "k.cu", options).files, (paths{cfg, nx}));
  // A call of a macro that wraps nothing adds nothing to the key.
  EXPECT_TRUE(scan_includes("#if OTHER(\"cfg.h\")\n#endif\n", "k.cu", options).digest.empty());
}

TEST(IncludeScanTest, AnAliasOrAMacroNamedArgumentOfAProbeWrapperIsFollowed) {
  // Found by review: an object-like alias of __has_include or of a wrapper (as TBB's
  // `#define __TBB_has_include __has_include`), a function-like -D forwarding to another -D
  // wrapper, and a wrapper called with a macro naming the header were all dropped.
  temp_dir d;
  fs::create_directories(d.path() / "inc");
  d.write("inc/pp.h",
          "#define HAS __has_include\n#define W(_X) __has_include(_X)\n#define HAS_W W\n"
          "#define HDR <named.h>\n");
  strings const options{"-I" + (d.path() / "inc").string(), "-DDHAS(x)=__has_include(x)",
                        "-DDHAS2(x)=DHAS(x)"};
  auto const digest_after_adding = [&](std::string const& source, std::string const& header) {
    auto const before = scan_includes(source, "k.cu", options);
    EXPECT_FALSE(before.computed) << source;
    auto const path = d.write("inc/" + header, "#define ADDED 1\n");
    auto const after = scan_includes(source, "k.cu", options);
    fs::remove(path);
    EXPECT_NE(before.digest, after.digest) << source;
  };
  digest_after_adding("#include <pp.h>\n#if HAS(<a.h>)\n#endif\n", "a.h");
  digest_after_adding("#include <pp.h>\n#if HAS_W(\"b.h\")\n#endif\n", "b.h");
  digest_after_adding("#if DHAS2(<c.h>)\n#endif\n", "c.h");
  digest_after_adding("#include <pp.h>\n#if W(HDR)\n#endif\n", "named.h");
  // A macro-named argument whose macro is defined nowhere in sight: the key cannot cover it.
  EXPECT_TRUE(scan_includes("#include <pp.h>\n#if W(UNSEEN)\n#endif\n", "k.cu", options).computed);
  // `defined(X)` and calls of macros that wrap nothing add nothing.
  EXPECT_FALSE(
      scan_includes("#include <pp.h>\n#if defined(X) || F(Y)\n#endif\n", "k.cu", options).computed);
}

TEST(IncludeScanTest, PathologicalLinesTakeLinearTime) {
  // Kernel text is user input: a long line of raw-string prefixes or unterminated probes must
  // not take quadratic time (each used to rescan the rest of the line).
  auto const start = std::chrono::steady_clock::now();
  std::string raw = "#include \"a.h\"\n";
  for (int i = 0; i < 100000; ++i) raw += "R\"R\"";
  EXPECT_EQ(names(raw), (strings{"q:a.h"}));
  std::string probes = "#include \"a.h\"\n";
  for (int i = 0; i < 50000; ++i) probes += "__has_include(<";
  EXPECT_EQ(names(probes), (strings{"q:a.h"}));
  // Arguments of macro calls: every '<' of the line before one '>', behind a long comment.
  std::string arguments = "#if A(";
  for (int i = 0; i < 100000; ++i) arguments += "<,";
  arguments.append(1, '>').append(100000, ' ').append("/*").append(100000, 'c').append("*/ +");
  for (int i = 0; i < 50000; ++i) arguments += "B(C(D(\"";
  std::vector<macro_call> calls;
  EXPECT_TRUE(find_includes(arguments, nullptr, &calls).empty());
  EXPECT_TRUE(calls.empty());
  // A macro of many parameters passing each on, and wrappers probing each (review: quadratic
  // lookups of parameters and of wrapper edges).
  std::string params;
  for (int i = 0; i < 8000; ++i) params += (i == 0 ? "p" : ",p") + std::to_string(i);
  std::string many = "#define F(" + params + ") G(" + params + ")\n#define G(" + params + ") ";
  for (int i = 0; i < 8000; i += 4) many += "__has_include(p" + std::to_string(i) + ") ";
  many += "\n#if F(<x.h>)\n#endif\n";
  EXPECT_TRUE(scan_includes(many, "k.cu", {}).digest.size() == 32U);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

}  // namespace
