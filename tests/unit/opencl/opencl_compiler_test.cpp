// SPDX-License-Identifier: Apache-2.0
// The OpenCL compiler's parts that need no device: build logs name the user's lines whether or
// not the compiler honours `#line`; the disk cache's key covers the files a program includes.
#include "opencl_compiler.hpp"

#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using cubert::detail::kernel_disk_cache;
using cubert::opencl::detail::disk_key_of;
using cubert::opencl::detail::source_lines_in_log;
using cubert::test::temp_dir;

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

constexpr char const* device = "PoCL device|OpenCL 3.0|6.0";
constexpr char const* platform = "OpenCL 3.0 PoCL";

TEST(OpenclDiskKey, ASourceWithoutIncludesKeysOnItsTextAndOptions) {
  std::string const source = "__kernel void k(__global int* x) { x[0] = 1; }";
  auto const key = disk_key_of(source, "-DCUBERT_CHECKED=0", device, platform);
  EXPECT_TRUE(key.bypass.empty());
  EXPECT_TRUE(key.headers.empty());
  EXPECT_EQ(key.key, kernel_disk_cache::key(source, "-DCUBERT_CHECKED=0", device, platform));
}

TEST(OpenclDiskKey, AnIncludedHeaderIsPartOfTheKeyWhicheverWayItsDirectoryIsNamed) {
  temp_dir dir;
  dir.write("inc/add_one.h", "#define ADD_ONE(v) ((v) + 1)\n");
  std::string const source =
      "#include \"add_one.h\"\n__kernel void k(__global int* x) { x[0] = ADD_ONE(x[0]); }";
  auto const inc = (dir.path() / "inc").string();
  auto const spaced = disk_key_of(source, "-I " + inc + " -DCUBERT_CHECKED=0", device, platform);
  auto const joined = disk_key_of(source, "-I" + inc + " -DCUBERT_CHECKED=0", device, platform);
  ASSERT_TRUE(spaced.bypass.empty()) << spaced.bypass;
  ASSERT_FALSE(spaced.key.empty());
  EXPECT_FALSE(spaced.headers.empty());
  EXPECT_EQ(spaced.headers, joined.headers);

  // An edit of the header is a miss; putting it back is the first key again.
  dir.write("inc/add_one.h", "#define ADD_ONE(v) ((v) + 2)\n");
  auto const edited = disk_key_of(source, "-I " + inc + " -DCUBERT_CHECKED=0", device, platform);
  EXPECT_NE(edited.key, spaced.key);
  EXPECT_NE(edited.headers, spaced.headers);
  dir.write("inc/add_one.h", "#define ADD_ONE(v) ((v) + 1)\n");
  EXPECT_EQ(disk_key_of(source, "-I " + inc + " -DCUBERT_CHECKED=0", device, platform).key,
            spaced.key);
}

TEST(OpenclDiskKey, AnIncludeNamedByAMacroWithNoValueBypassesTheCache) {
  std::string const source = "#include KERNEL_HEADER\n__kernel void k(__global int* x) {}";
  auto const key = disk_key_of(source, "-DCUBERT_CHECKED=0", device, platform);
  EXPECT_TRUE(key.key.empty());
  EXPECT_FALSE(key.bypass.empty());
}

TEST(OpenclDiskKey, AMacroValueFromTheOptionsIsFollowed) {
  temp_dir dir;
  dir.write("chosen.h", "#define VALUE 3\n");
  std::string const source = "#include KERNEL_HEADER\n__kernel void k(__global int* x) {}";
  auto const options = "-I " + dir.path().string() + " -DKERNEL_HEADER=\"chosen.h\"";
  auto const key = disk_key_of(source, options, device, platform);
  EXPECT_TRUE(key.bypass.empty()) << key.bypass;
  EXPECT_FALSE(key.headers.empty());
}

}  // namespace
