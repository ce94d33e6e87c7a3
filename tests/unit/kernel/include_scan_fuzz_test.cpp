// SPDX-License-Identifier: Apache-2.0
// Deterministic fuzzing of the include scanner behind the kernel disk cache's key: kernel
// sources and headers are arbitrary user text, which must never crash, hang or hide a header.
#include "kernel/include_scan.hpp"
#include "temp_dir.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace fs = std::filesystem;
using cubert::detail::find_includes;
using cubert::detail::header_macro;
using cubert::detail::include_directive;
using cubert::detail::macro_call;
using cubert::detail::scan_includes;
using cubert::test::temp_dir;

// Fixed, so that a failure reproduces; every failure names the seed and the iteration.
constexpr std::uint64_t seed = 0x5ca7'1ec5'0f'c0ffeeULL;

// Whole-test budget: the lexer is linear, so even Debug + ASan stays far below it; a hang or a
// quadratic path shows as a failure instead of a stuck CI job.
constexpr auto budget = std::chrono::seconds(20);

bool is_identifier(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  });
}

std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char const c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

// Realistic kernel and header text, the starting points of the mutations.
constexpr std::array<std::string_view, 16> corpus{
    "#include \"a.h\"\n#include <b.h>\n__global__ void k(float* x) { x[0] = 1; }\n",
    "#pragma once\n#include_next <c.h>\n#define V 1\n",
    "#if __has_include(\"cfg.h\") && __has_include(<cuda/std/cstdint>)\n#include \"cfg.h\"\n"
    "#endif\n",
    "#define HEADER \"h.h\"\n#define ALIAS HEADER\n#include ALIAS\n#include_next HEADER\n",
    "// #include \"no.h\"\n/* #include \"no2.h\"\n*/\n#include \"yes.h\"\n",
    "const char* s = R\"x(\n#include \"raw.h\"\n)x\";\n#include \"after_raw.h\"\n",
    "int n = 1'000'000; char q = '\"';\n#include \"after.h\"\n",
    "#inc\\\nlude \"spliced.h\"\n#include \\\r\n <crlf.h>\r\n",
    "%:include \"digraph.h\"\n  %: include <d2.h>\n",
    "\xEF\xBB\xBF#include \"bom.h\"\n",
    "#define HAS(x) __has_include(x)\n#if HAS(<used.h>)\n#endif\n",
    "#define STR(x) #x\n#include STR(value.h)\n",
    "template <typename T> __device__ T f(T a) { return a < 1 ? a : a >> 2; }\n",
    "#if 0\ndon't /* \n#endif\n#include \"z.h\"\n// */\n",
    "#define A B\n#define B A\n#include A\n",
    "#error don't\n#include <after_error.h>\n#include \"unterminated.h\n#include \"\"\n",
};

// Tokens the lexer gives a meaning to, inserted and swapped around by the mutations.
constexpr std::array<std::string_view, 37> tokens{"#",
                                                  "%:",
                                                  "include",
                                                  "include_next",
                                                  "define",
                                                  "__has_include",
                                                  "__has_include_next",
                                                  "(",
                                                  ")",
                                                  "\"",
                                                  "'",
                                                  "<",
                                                  ">",
                                                  "R\"x(",
                                                  ")x\"",
                                                  "R\"(",
                                                  ")\"",
                                                  "/*",
                                                  "*/",
                                                  "//",
                                                  "\\\n",
                                                  "\\\r\n",
                                                  "\n",
                                                  "1'000",
                                                  "0x1'f",
                                                  "\xEF\xBB\xBF",
                                                  " ",
                                                  "\"a.h\"",
                                                  "<b.h>",
                                                  "H",
                                                  "u8R\"d(",
                                                  ")d\"",
                                                  "?\?=",
                                                  "?\?/\n",
                                                  "if",
                                                  ",",
                                                  "HAS("};

class fuzzer {
 public:
  std::mt19937_64 rng{seed};

  std::size_t below(std::size_t n) { return n == 0 ? 0 : rng() % n; }

  std::string random_bytes() {
    std::string s(below(513), '\0');
    for (auto& c : s) c = static_cast<char>(below(256));
    return s;
  }

  std::string mutated() {
    std::string s(corpus[below(corpus.size())]);
    for (auto n = 1 + below(8); n > 0; --n) mutate(s);
    return s;
  }

 private:
  std::string_view token() { return tokens[below(tokens.size())]; }

  void mutate(std::string& s) {
    auto const at = below(s.size() + 1);
    switch (below(7)) {
      case 0:  // Insert a byte.
        s.insert(at, 1, static_cast<char>(below(256)));
        break;
      case 1:  // Delete a run of bytes.
        if (at < s.size()) s.erase(at, 1 + below(4));
        break;
      case 2:  // Replace a byte.
        if (at < s.size()) s[at] = static_cast<char>(below(256));
        break;
      case 3: {  // Duplicate a run.
        if (at >= s.size()) break;
        auto const piece = s.substr(at, 1 + below(16));
        s.insert(below(s.size() + 1), piece);
        break;
      }
      case 4:  // Insert a token.
        s.insert(at, token());
        break;
      case 5: {  // Replace a run with a token.
        auto const t = token();
        s.replace(std::min(at, s.size()), below(4), t);
        break;
      }
      default: {  // Replace a token already there with another.
        auto const from = token();
        if (auto const p = s.find(from, at); p != std::string::npos)
          s.replace(p, from.size(), token());
      }
    }
  }
};

// What must hold of find_includes on any text.
void check_text(std::string const& text, std::string_view what, std::size_t iteration) {
  SCOPED_TRACE(fmt::format("seed {:#x}, {} iteration {}, input \"{}\"", seed, what, iteration,
                           printable(text)));
  auto const check = [](std::vector<include_directive> const& directives) {
    for (auto const& d : directives) {
      EXPECT_FALSE(d.name.empty());
      EXPECT_EQ(d.name.find('\n'), std::string::npos) << d.name;
      if (d.computed) {
        EXPECT_TRUE(is_identifier(d.name)) << d.name;
      }
    }
  };
  auto const plain = find_includes(text);
  check(plain);
  std::vector<header_macro> macros;
  EXPECT_EQ(plain, find_includes(text, &macros)) << "collecting macros changed the directives";
  std::vector<macro_call> calls;
  EXPECT_EQ(plain, find_includes(text, nullptr, &calls)) << "collecting calls changed them";
  for (auto const& c : calls) {
    EXPECT_TRUE(is_identifier(c.callee)) << c.callee;
    if (c.macro.empty()) {
      EXPECT_FALSE(c.header.name.empty());
      EXPECT_EQ(c.header.name.find('\n'), std::string::npos) << c.header.name;
    } else {
      EXPECT_TRUE(is_identifier(c.macro)) << c.macro;
      EXPECT_TRUE(c.header.name.empty()) << c.header.name;
    }
  }
  for (auto const& m : macros) {
    EXPECT_TRUE(is_identifier(m.name)) << m.name;
    EXPECT_FALSE(m.value.name.empty());
    EXPECT_EQ(m.value.name.find('\n'), std::string::npos) << m.value.name;
    if (m.value.computed) {
      EXPECT_TRUE(is_identifier(m.value.name)) << m.value.name;
    }
  }
  // Nothing after a directive on the first line can hide it.
  auto const marked = find_includes("#include \"zz_marker.h\"\n" + text);
  ASSERT_FALSE(marked.empty());
  EXPECT_EQ(marked.front(), (include_directive{.name = "zz_marker.h", .quoted = true}));
}

TEST(IncludeScanFuzzTest, FindIncludesHoldsOnRandomAndMutatedText) {
  constexpr std::size_t random_inputs = 10000;
  constexpr std::size_t mutated_inputs = 30000;
  auto const start = std::chrono::steady_clock::now();
  fuzzer f;
  for (std::size_t i = 0; i < random_inputs && !HasFatalFailure(); ++i) {
    check_text(f.random_bytes(), "random", i);
  }
  for (std::size_t i = 0; i < mutated_inputs && !HasFatalFailure(); ++i) {
    check_text(f.mutated(), "mutated", i);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, budget);
}

// A random include graph: headers in three directories (next to the source and two -I ones)
// naming each other plainly, through macros defined in other headers or -D options, and
// through probes.
struct graph {
  std::vector<std::string> options;
  std::string source;
  fs::path source_name;
  std::vector<fs::path> search;  // The -I directories, in order.
};

// The file a plain `#include "name"` from `dir` reaches: next to the includer, then the -I
// directories; empty when none has it.
fs::path resolve_quoted(graph const& g, fs::path const& dir, std::string const& name) {
  if (fs::is_regular_file(dir / name)) return fs::canonical(dir / name);
  for (auto const& d : g.search) {
    if (fs::is_regular_file(d / name)) return fs::canonical(d / name);
  }
  return {};
}

// The plain quoted includes of `text`, and its probes through the -D wrapper `HASW`.
std::vector<std::string> plain_quoted_includes(std::string const& text) {
  std::vector<std::string> out;
  std::vector<macro_call> calls;
  for (auto const& d : find_includes(text, nullptr, &calls)) {
    if (d.quoted && !d.computed && !d.probe && !d.next) out.push_back(d.name);
  }
  for (auto const& c : calls) {
    if (c.callee == "HASW" && c.header.quoted) out.push_back(c.header.name);
  }
  return out;
}

std::string read_all(fs::path const& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

graph make_graph(fuzzer& f, temp_dir const& d, std::size_t iteration) {
  graph g;
  auto const root = d.path() / fmt::format("g{}", iteration);
  std::array<fs::path, 3> const dirs{root / "src", root / "inc", root / "inc2"};
  for (auto const& dir : dirs) fs::create_directories(dir);
  g.search = {dirs[1], dirs[2]};
  g.options = {"-I" + dirs[1].string(), "-I" + dirs[2].string(), "-DHASW(x)=__has_include(x)"};
  g.source_name = dirs[0] / "k.cu";
  auto const headers = 3 + f.below(6);
  auto const header = [&](std::size_t k) { return fmt::format("h{}.h", k); };
  std::vector<std::string> texts(headers);
  auto const line = [&](std::size_t from) {
    auto const k = f.below(headers);
    auto const macro = fmt::format("M{}_{}", from, f.below(1000));
    switch (f.below(10)) {
      case 0:
      case 1:
        return fmt::format("#include \"{}\"\n", header(k));
      case 2:
        return fmt::format("#include <{}>\n", header(k));
      case 3:  // Defined in another header, used here.
        texts[f.below(headers)] += fmt::format("#define {} \"{}\"\n", macro, header(k));
        return fmt::format("#include {}\n", macro);
      case 4:
        g.options.push_back(fmt::format("-D{}=<{}>", macro, header(k)));
        return fmt::format("#include {}\n", macro);
      case 5:
        return fmt::format("#if __has_include(\"{}\")\n#endif\n", header(k));
      case 6:
        return fmt::format("#if __has_include(<absent{}.h>)\n#endif\n", k);
      case 7:
        return std::string("#include \"missing.h\"\n");
      case 8:  // Through a wrapper, as CCCL's _CCCL_HAS_INCLUDE.
        return fmt::format("#if HASW(\"{}\") || HASW(<absent{}.h>)\n#endif\n", header(k), k);
      default:
        return fmt::format("int v{} = {};\n", f.below(1000), f.below(1000));
    }
  };
  g.source = line(headers) + line(headers) + "#include \"h0.h\"\n";
  for (std::size_t k = 0; k < headers; ++k) {
    for (auto n = f.below(5); n > 0; --n) texts[k] += line(k);
  }
  for (std::size_t k = 0; k < headers; ++k) {
    // Mostly in one place; sometimes also shadowed in another, which the search order decides.
    d.write(dirs[f.below(3)] / header(k), texts[k]);
    if (f.below(4) == 0) d.write(dirs[f.below(3)] / header(k), texts[k] + "// shadow\n");
  }
  return g;
}

TEST(IncludeScanFuzzTest, ScanIncludesHoldsOnRandomIncludeGraphs) {
  constexpr std::size_t graphs = 120;
  auto const start = std::chrono::steady_clock::now();
  fuzzer f;
  temp_dir d;
  for (std::size_t i = 0; i < graphs; ++i) {
    SCOPED_TRACE(fmt::format("seed {:#x}, graph {}", seed, i));
    auto const g = make_graph(f, d, i);
    auto const scan = scan_includes(g.source, g.source_name.string(), g.options);
    EXPECT_FALSE(scan.truncated);
    std::set<fs::path> const files(scan.files.begin(), scan.files.end());
    EXPECT_EQ(files.size(), scan.files.size()) << "a file scanned twice";
    // Every plain quoted include of the source and of each file reached is reached too.
    auto const covers = [&](fs::path const& dir, std::string const& text) {
      for (auto const& name : plain_quoted_includes(text)) {
        auto const target = resolve_quoted(g, dir, name);
        if (!target.empty()) {
          EXPECT_TRUE(files.contains(target)) << name << " from " << dir;
        }
      }
    };
    covers(g.source_name.parent_path(), g.source);
    for (auto const& file : scan.files) {
      // `files` holds canonical paths; the graph has no links, so the directory is as found.
      covers(file.parent_path(), read_all(file));
    }
    ASSERT_EQ(scan.digest.size(), 32U) << "h0.h is always reached";
    EXPECT_EQ(scan.digest, scan_includes(g.source, g.source_name.string(), g.options).digest);
    // Any edit to any file reached changes the key.
    for (auto const& file : scan.files) {
      auto const before = read_all(file);
      std::ofstream(file, std::ios::binary | std::ios::app) << "// edited\n";
      EXPECT_NE(scan.digest, scan_includes(g.source, g.source_name.string(), g.options).digest)
          << file;
      std::ofstream(file, std::ios::binary | std::ios::trunc) << before;
    }
    EXPECT_EQ(scan.digest, scan_includes(g.source, g.source_name.string(), g.options).digest);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, budget);
}

}  // namespace
