// SPDX-License-Identifier: Apache-2.0
// Whole-cache operations: list, export → import into an empty root, prune, clear.
#include "tune_fixture.hpp"

#include <cubert/error.hpp>
#include <cubert/tune/tune_cache.hpp>
#include <cubert/tune/tune_cache_store.hpp>

#include <gtest/gtest.h>

namespace {

using cubert::tune::candidate_result;
using cubert::tune::candidate_stats;
using cubert::tune::candidate_status;
using cubert::tune::tune_cache;

class TuneCacheStoreTest : public cubert::test::tune_fixture {
 protected:
  static std::vector<candidate_result> one(std::string name, int us) {
    candidate_result r;
    r.name = std::move(name);
    r.status = candidate_status::ok;
    auto const m = std::chrono::microseconds(us);
    r.stats = candidate_stats{m, m, m, m, 0.0, 3};
    return {r};
  }
};

TEST_F(TuneCacheStoreTest, ExportImportPruneClear) {
  {
    tune_cache a(dir_ / "src", "matmul", "gpu A");
    a.append("k1", one("x", 1), std::nullopt);
    a.append("k1", one("x", 2), std::nullopt);  // Supersedes the first.
    a.append("k2", one("y", 3), cubert::tune::tune_decision{"k2", "c", 0, "y"});
    tune_cache b(dir_ / "src", "reduce", "gpu B");
    b.append("k", one("z", 4), std::nullopt);
  }
  auto const listed = cubert::tune::list_cache(dir_ / "src");
  ASSERT_EQ(listed.size(), 2U);
  auto const& matmul = listed[0].tuner == "matmul" ? listed[0] : listed[1];
  EXPECT_EQ(matmul.device, "gpu A");
  EXPECT_EQ(matmul.keys, 2U);
  EXPECT_EQ(matmul.candidates, 3U);
  EXPECT_EQ(matmul.decisions, 1U);

  auto const bundle = cubert::tune::export_cache(dir_ / "src");
  EXPECT_EQ(cubert::tune::import_cache(dir_ / "dst", bundle), 5U);
  EXPECT_EQ(cubert::tune::import_cache(dir_ / "dst", bundle), 0U);  // Merge is idempotent.
  tune_cache imported(dir_ / "dst", "matmul", "gpu A");
  EXPECT_EQ(imported.find("k1", "x", "")->stats->median, std::chrono::microseconds(2));
  EXPECT_TRUE(tune_cache(dir_ / "dst", "reduce", "gpu B").find("k", "z", "").has_value());

  EXPECT_EQ(cubert::tune::prune_cache(dir_ / "dst", false), 1U);
  tune_cache pruned(dir_ / "dst", "matmul", "gpu A");
  EXPECT_EQ(pruned.find("k1", "x", "")->stats->median, std::chrono::microseconds(2));
  EXPECT_EQ(cubert::tune::list_cache(dir_ / "dst")[0].candidates +
                cubert::tune::list_cache(dir_ / "dst")[1].candidates,
            3U);

  EXPECT_EQ(cubert::tune::clear_cache(dir_ / "dst"), 2U);
  EXPECT_TRUE(cubert::tune::list_cache(dir_ / "dst").empty());
}

TEST_F(TuneCacheStoreTest, MalformedBundleWritesNothing) {
  EXPECT_THROW(cubert::tune::import_cache(dir_, "{not json"), cubert::invalid_argument);
  EXPECT_THROW(cubert::tune::import_cache(dir_, R"({"format":"cubert-tune-cache","files":[{}]})"),
               cubert::invalid_argument);
  EXPECT_TRUE(cubert::tune::list_cache(dir_).empty());
}

}  // namespace
