// SPDX-License-Identifier: Apache-2.0
// The core's dlopen table loader: candidates tried in order, a table of required and optional
// entry points, and the reason when a library or a required entry point is missing.
#include "base/shared_library.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using cubert::detail::entry_point;
using cubert::detail::resolve_entry_points;
using cubert::detail::shared_library;

// A table as a backend writes one: function pointers named after their symbols.
struct math_api {
  double (*cos)(double) = nullptr;
  double (*sqrt)(double) = nullptr;
  void (*absent)() = nullptr;
};

TEST(SharedLibraryTest, OpensTheFirstCandidateThatLoadsAndRecordsTheOnesBefore) {
  std::vector<std::string> const candidates{"/nonexistent/libcubert_none.so", "libm.so.6",
                                            "libc.so.6"};
  auto const lib = shared_library::open(candidates);
  ASSERT_TRUE(lib.is_open()) << lib.refusal_lines();
  EXPECT_EQ(lib.file(), "libm.so.6");
  ASSERT_EQ(lib.refusals().size(), 1u);
  EXPECT_EQ(lib.refusals()[0].first, "/nonexistent/libcubert_none.so");
  EXPECT_FALSE(lib.refusals()[0].second.empty());
  EXPECT_NE(lib.refusal_lines().find("\n  /nonexistent/libcubert_none.so: "), std::string::npos)
      << lib.refusal_lines();
}

TEST(SharedLibraryTest, ResolvesRequiredAndOptionalEntryPoints) {
  std::vector<std::string> const candidates{"libm.so.6"};
  auto const lib = shared_library::open(candidates);
  ASSERT_TRUE(lib.is_open()) << lib.refusal_lines();
  constexpr entry_point<math_api> table[] = {
      CUBERT_ENTRY_POINT(math_api, cos, "cos", true),
      CUBERT_ENTRY_POINT(math_api, sqrt, "sqrt", true),
      CUBERT_ENTRY_POINT(math_api, absent, "cubert_no_such_symbol", false),
  };
  math_api api;
  api.absent = [] {};  // overwritten: a missing optional entry point is left null
  EXPECT_TRUE(resolve_entry_points(lib, api, table).empty());
  ASSERT_NE(api.cos, nullptr);
  ASSERT_NE(api.sqrt, nullptr);
  EXPECT_EQ(api.absent, nullptr);
  EXPECT_DOUBLE_EQ(api.sqrt(16.0), 4.0);
  EXPECT_DOUBLE_EQ(api.cos(0.0), 1.0);
}

TEST(SharedLibraryTest, NamesTheFirstMissingRequiredEntryPoint) {
  std::vector<std::string> const candidates{"libm.so.6"};
  auto const lib = shared_library::open(candidates);
  ASSERT_TRUE(lib.is_open()) << lib.refusal_lines();
  constexpr entry_point<math_api> table[] = {
      CUBERT_ENTRY_POINT(math_api, absent, "cubert_no_such_symbol", true),
      CUBERT_ENTRY_POINT(math_api, cos, "cos", true),
      CUBERT_ENTRY_POINT(math_api, sqrt, "cubert_no_such_symbol_either", true),
  };
  math_api api;
  EXPECT_EQ(resolve_entry_points(lib, api, table), "cubert_no_such_symbol");
  EXPECT_NE(api.cos, nullptr);  // the rest of the table is still looked up
}

TEST(SharedLibraryTest, AMissingLibraryGivesEveryCandidateItsReason) {
  std::vector<std::string> const candidates{"/nonexistent/liba.so", "libcubert_no_such.so.7"};
  auto const lib = shared_library::open(candidates);
  EXPECT_FALSE(lib.is_open());
  EXPECT_TRUE(lib.file().empty());
  ASSERT_EQ(lib.refusals().size(), 2u);
  auto const lines = lib.refusal_lines();
  EXPECT_NE(lines.find("\n  /nonexistent/liba.so: "), std::string::npos) << lines;
  EXPECT_NE(lines.find("\n  libcubert_no_such.so.7: "), std::string::npos) << lines;
  EXPECT_EQ(lib.symbol("cos"), nullptr);
  math_api api;
  constexpr entry_point<math_api> table[] = {CUBERT_ENTRY_POINT(math_api, cos, "cos", true)};
  EXPECT_EQ(resolve_entry_points(lib, api, table), "cos");
}

TEST(SharedLibraryTest, NoCandidatesOpensNothing) {
  auto const lib = shared_library::open({});
  EXPECT_FALSE(lib.is_open());
  EXPECT_TRUE(lib.refusals().empty());
}

}  // namespace
