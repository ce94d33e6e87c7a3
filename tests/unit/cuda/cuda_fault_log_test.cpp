// SPDX-License-Identifier: Apache-2.0
// The bookkeeping behind kernel-fault reports (cuda_fault.hpp); no device needed.
#include "cuda_fault.hpp"
#include "saved_env.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace {

using cubert::cuda::detail::is_sticky;
using cubert::cuda::detail::launch_blocking;
using cubert::cuda::detail::launch_log;
using cubert::cuda::detail::loaded_kernel;

loaded_kernel named(std::string name) {
  loaded_kernel k;
  k.name = std::move(name);
  return k;
}

TEST(CudaFaultLog, ListsLaunchesOldestFirstUntilCleared) {
  auto const a = named("a");
  auto const b = named("b");
  launch_log log;
  EXPECT_EQ(log.describe(), "none");
  log.record(a, {1, 2, 3}, {32, 1, 1});
  log.record(b, {4, 1, 1}, {128, 2, 1});
  EXPECT_EQ(log.size(), 2u);
  EXPECT_EQ(log.describe(),
            "'a' grid (1, 2, 3) block (32, 1, 1), 'b' grid (4, 1, 1) block (128, 2, 1)");
  log.clear();
  EXPECT_EQ(log.describe(), "none");
}

TEST(CudaFaultLog, KeepsTheNewestAndCountsTheRest) {
  auto const a = named("a");
  auto const b = named("b");
  launch_log log;
  for (std::uint32_t i = 0; i < 3; ++i) log.record(a, {i, 1, 1}, {1, 1, 1});
  for (std::uint32_t i = 0; i < launch_log::kept; ++i) log.record(b, {i, 1, 1}, {1, 1, 1});
  auto const text = log.describe();
  EXPECT_EQ(text.rfind("3 earlier, then 'b' grid (0, 1, 1)", 0), 0u) << text;
  EXPECT_EQ(text.find("'a'"), std::string::npos) << text;
  EXPECT_NE(text.find("'b' grid (7, 1, 1) block (1, 1, 1)"), std::string::npos) << text;
}

TEST(CudaFaultLog, ForgetsWhatAWaitSawComplete) {
  auto const a = named("a");
  auto const b = named("b");
  launch_log log;
  log.record(a, {1, 1, 1}, {1, 1, 1});
  auto const mark = log.mark();  // A wait recorded here covers `a`.
  log.record(b, {2, 1, 1}, {1, 1, 1});
  log.forget_through(mark);
  EXPECT_EQ(log.size(), 1u);
  EXPECT_EQ(log.describe(), "'b' grid (2, 1, 1) block (1, 1, 1)");
  log.forget_through(0);  // An older wait, finishing late, brings nothing back.
  EXPECT_EQ(log.size(), 1u);
  log.forget_through(mark + 100);  // Never beyond what was launched.
  EXPECT_EQ(log.size(), 0u);
  log.record(a, {3, 1, 1}, {1, 1, 1});
  EXPECT_EQ(log.describe(), "'a' grid (3, 1, 1) block (1, 1, 1)");
}

TEST(CudaFaultLog, CountsOnlyTheSuspectsBeyondTheKeptOnes) {
  auto const a = named("a");
  launch_log log;
  for (std::uint32_t i = 0; i < 20; ++i) log.record(a, {i, 1, 1}, {1, 1, 1});
  log.forget_through(10);
  auto const text = log.describe();
  EXPECT_EQ(text.rfind("2 earlier, then 'a' grid (12, 1, 1)", 0), 0u) << text;
}

TEST(CudaFaultLog, StickyResultsAreTheKernelFaults) {
  EXPECT_TRUE(is_sticky(CUDA_ERROR_ILLEGAL_ADDRESS));
  EXPECT_TRUE(is_sticky(CUDA_ERROR_LAUNCH_FAILED));
  EXPECT_TRUE(is_sticky(CUDA_ERROR_ASSERT));
  EXPECT_TRUE(is_sticky(CUDA_ERROR_MISALIGNED_ADDRESS));
  // Every other result that cuda.h says needs the process restarted.
  EXPECT_TRUE(is_sticky(CUDA_ERROR_CONTAINED));
  EXPECT_TRUE(is_sticky(CUDA_ERROR_TENSOR_MEMORY_LEAK));
  EXPECT_TRUE(is_sticky(CUDA_ERROR_MPS_CLIENT_TERMINATED));
  EXPECT_TRUE(is_sticky(CUDA_ERROR_EXTERNAL_DEVICE));
  EXPECT_TRUE(is_sticky(CUDA_ERROR_ECC_UNCORRECTABLE));
  EXPECT_FALSE(is_sticky(CUDA_SUCCESS));
  EXPECT_FALSE(is_sticky(CUDA_ERROR_NOT_READY));
  EXPECT_FALSE(is_sticky(CUDA_ERROR_OUT_OF_MEMORY));
  EXPECT_FALSE(is_sticky(CUDA_ERROR_INVALID_VALUE));
  EXPECT_FALSE(is_sticky(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES));  // Refused; nothing ran.
}

using cubert::test::saved_env;

TEST(CudaFaultLog, LaunchBlockingComesFromTheOptionThenTheEnvironment) {
  saved_env ours("CUBERT_CUDA_LAUNCH_BLOCKING");
  saved_env cudas("CUDA_LAUNCH_BLOCKING");
  EXPECT_FALSE(launch_blocking(std::nullopt));
  EXPECT_TRUE(launch_blocking(true));
  ::setenv("CUDA_LAUNCH_BLOCKING", "1", 1);
  EXPECT_TRUE(launch_blocking(std::nullopt));
  EXPECT_FALSE(launch_blocking(false));  // The option wins.
  ::setenv("CUDA_LAUNCH_BLOCKING", "0", 1);
  EXPECT_FALSE(launch_blocking(std::nullopt));
  ::setenv("CUBERT_CUDA_LAUNCH_BLOCKING", "yes", 1);
  EXPECT_TRUE(launch_blocking(std::nullopt));
  ::setenv("CUBERT_CUDA_LAUNCH_BLOCKING", "", 1);
  EXPECT_FALSE(launch_blocking(std::nullopt));
}

}  // namespace
