// SPDX-License-Identifier: Apache-2.0
// Build logs name the user's lines whether or not the compiler honours `#line` (no device needed).
#include "opencl_build_log.hpp"

#include <gtest/gtest.h>

namespace {

using cubert::opencl::detail::source_lines_in_log;

constexpr char const program[] =
    "#define A 1\n"         // 1
    "#define B 2\n"         // 2
    "#line 1 \"source\"\n"  // 3: the user's line 1 is physical line 4
    "kernel void k() {\n"
    "  x = 1;\n"
    "}\n";

TEST(OpenclBuildLog, ACompilerIgnoringTheDirectiveIsRenumbered) {
  auto const log = source_lines_in_log(
      "<kernel>:5:3: error: use of undeclared identifier 'x'\n  x = 1;\n  ^\n<kernel>:6:1: note",
      program);
  EXPECT_EQ(
      log,
      "<kernel>:2:3: error: use of undeclared identifier 'x'\n  x = 1;\n  ^\n<kernel>:3:1: note");
}

TEST(OpenclBuildLog, ACompilerHonouringItKeepsItsPositions) {
  std::string const log = "source:2:3: error: use of undeclared identifier 'x'";
  EXPECT_EQ(source_lines_in_log(log, program), log);
}

TEST(OpenclBuildLog, PositionsInThePreludeAndMalformedOnesStay) {
  // A line at or before the directive is the prelude's own; text that is no number stays too.
  EXPECT_EQ(source_lines_in_log("<kernel>:2:9: error\n<kernel>:x\n<kernel>:", program),
            "<kernel>:2:9: error\n<kernel>:x\n<kernel>:");
}

TEST(OpenclBuildLog, ASourceWithoutTheDirectiveIsLeftAlone) {
  std::string const log = "<kernel>:40:1: error: expected ';'";
  EXPECT_EQ(source_lines_in_log(log, "kernel void k() {}\n"), log);
  EXPECT_EQ(source_lines_in_log(log, "#line 1\nkernel void k() {}\n"), log);
}

}  // namespace
