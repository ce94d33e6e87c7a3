// SPDX-License-Identifier: Apache-2.0
#include <cubert/cpu.hpp>
#include <cubert/error.hpp>
#include <cubert/kernel.hpp>
#include <cubert/portable.hpp>

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace {

using cubert::kernel;

void noop(cubert::cpu::kernel_context const&) {}

kernel make(std::string name, std::string info = "", std::uint32_t x = 1) {
  return kernel::builder(std::move(name)).info(std::move(info)).cube_dim(x).cpu(noop).build();
}

TEST(KernelTest, IdIsStableAndDependsOnEverythingThatChangesCode) {
  EXPECT_EQ(make("add").id(), make("add").id());
  EXPECT_NE(make("add").id(), make("mul").id());
  EXPECT_NE(make("add", "f32").id(), make("add", "f16").id());
  EXPECT_NE(make("add", "", 64).id(), make("add", "", 128).id());
  auto a = kernel::builder("k").cuda_source("src a", "main").build();
  auto b = kernel::builder("k").cuda_source("src b", "main").build();
  auto c = kernel::builder("k").cuda_source("src a", "main", {"-O3"}).build();
  EXPECT_NE(a.id(), b.id());
  EXPECT_NE(a.id(), c.id());
  // Field boundaries matter: ("ab", "c") is not ("a", "bc").
  EXPECT_NE(make("ab", "c").id(), make("a", "bc").id());
}

TEST(KernelTest, IdValueIsReproducibleAcrossProcesses) {
  // XXH3 is specified, so the id of a fixed definition is a constant; recompute it to be sure
  // it does not depend on addresses or on the callable.
  auto const id1 = make("stable", "v1", 32).id();
  auto const id2 = kernel::builder("stable")
                       .info("v1")
                       .cube_dim(32)
                       .cpu([](cubert::cpu::kernel_context const&) {})
                       .build()
                       .id();
  EXPECT_EQ(id1, id2);
  EXPECT_EQ(id1.to_string().size(), 16u);
  // The same in every process, build and run: XXH3-64 of the tagged, length-prefixed,
  // little-endian fields (name, info, cube dims, shared memory, "native"), computed apart from
  // the library. Two ids from one process could not show a dependence on anything that is
  // the same in both (a static address, uninitialised bytes): this constant does. It changes
  // only with the id's definition, which invalidates every cache keyed by ids.
  EXPECT_EQ(id1.to_string(), "1a156ad625f4997c");
}

// A cluster or a cooperative launch changes the launch, so it changes the id; a kernel that sets
// neither (or the default 1 x 1 x 1 cluster) keeps the id it had before they existed (the
// constant above).
TEST(KernelTest, ClusterDimsAndCooperationArePartOfTheIdOnlyWhenSet) {
  auto const with = [](std::uint32_t x, std::uint32_t y) {
    return kernel::builder("stable").info("v1").cube_dim(32).cluster_dim(x, y).cpu(noop).build();
  };
  EXPECT_EQ(with(1, 1).id(), make("stable", "v1", 32).id());
  EXPECT_EQ(with(1, 1).id().to_string(), "1a156ad625f4997c");
  EXPECT_NE(with(2, 1).id(), with(1, 1).id());
  EXPECT_NE(with(2, 1).id(), with(1, 2).id());
  EXPECT_EQ(with(2, 1).id(), with(2, 1).id());
  EXPECT_EQ(with(4, 2).cluster_dim(), (cubert::cube_dim{4, 2, 1}));
  EXPECT_EQ(make("plain").cluster_dim(), (cubert::cube_dim{1, 1, 1}));
  EXPECT_THROW(kernel::builder("k").cluster_dim(2, 0), cubert::invalid_argument);
  auto const cooperative =
      kernel::builder("stable").info("v1").cube_dim(32).cooperative().cpu(noop).build();
  EXPECT_TRUE(cooperative.cooperative());
  EXPECT_FALSE(make("stable", "v1", 32).cooperative());
  EXPECT_NE(cooperative.id(), make("stable", "v1", 32).id());
}

TEST(KernelTest, ModeQualifiesTheId) {
  auto const id = make("add").id();
  auto const checked = id.with_mode(cubert::execution_mode::checked);
  auto const unchecked = id.with_mode(cubert::execution_mode::unchecked);
  EXPECT_NE(checked, unchecked);
  EXPECT_NE(id, checked);
  EXPECT_EQ(checked.hash(), id.hash());
  EXPECT_EQ(unchecked.to_string(), id.to_string() + "-unchecked");
  std::unordered_set<cubert::kernel_id> set{id, checked, unchecked};
  EXPECT_EQ(set.size(), 3u);
}

TEST(KernelTest, AccessorsAndPayloads) {
  auto k = kernel::builder("k")
               .cube_dim(16, 2)
               .shared_memory(1024)
               .cpu(noop)
               .opencl_source("cl", "entry", {"-cl-fast-relaxed-math"})
               .build();
  EXPECT_EQ(k.name(), "k");
  EXPECT_EQ(k.cube_dim(), (cubert::cube_dim{16, 2, 1}));
  EXPECT_EQ(k.shared_memory(), 1024u);
  EXPECT_NE(k.cpu(), nullptr);
  ASSERT_NE(k.opencl_source(), nullptr);
  EXPECT_EQ(k.opencl_source()->entry_point, "entry");
  EXPECT_EQ(k.cuda_source(), nullptr);
  EXPECT_EQ(k.ptx(), nullptr);
  kernel copy = k;  // Shares the definition.
  EXPECT_EQ(copy.cpu(), k.cpu());
}

TEST(KernelTest, BuilderRejectsBadInput) {
  EXPECT_THROW(kernel::builder(""), cubert::invalid_argument);
  EXPECT_THROW(kernel::builder("k").cube_dim(0), cubert::invalid_argument);
  EXPECT_THROW((void)kernel::builder("k").build(), cubert::invalid_argument);
  EXPECT_THROW(kernel::builder("k").cpu(nullptr), cubert::invalid_argument);
  kernel::builder b("k");
  b.cpu(noop);
  (void)b.build();
  EXPECT_THROW((void)b.build(), cubert::invalid_argument);
  EXPECT_FALSE(kernel{}.valid());
}

}  // namespace

// A portable source becomes the CUDA and the OpenCL payload, each after its prelude, unless the
// kernel has a payload of its own for that backend, whatever the order of the calls.
TEST(KernelPortableTest, APortableSourceFillsTheBackendsWithoutAPayloadOfTheirOwn) {
  std::string const src =
      "CUBERT_KERNEL k(CUBERT_GLOBAL uint* x) { x[CUBERT_ABSOLUTE_POS_X] = 1; }";
  auto const both = cubert::kernel::builder("p").portable_source(src, "k", {"-DX=1"}).build();
  ASSERT_NE(both.cuda_source(), nullptr);
  ASSERT_NE(both.opencl_source(), nullptr);
  ASSERT_NE(both.portable_source(), nullptr);
  EXPECT_EQ(both.cuda_source()->source, std::string(cubert::portable::cuda_prelude) + src);
  EXPECT_EQ(both.opencl_source()->source, std::string(cubert::portable::opencl_prelude) + src);
  EXPECT_EQ(both.cuda_source()->entry_point, "k");
  EXPECT_EQ(both.opencl_source()->options, std::vector<std::string>{"-DX=1"});
  // The compilers' line numbers stay the source's.
  EXPECT_TRUE(std::string_view(cubert::portable::cuda_prelude).ends_with("#line 1\n"));
  // OpenCL's names a file: a compiler that ignores the directive (NVIDIA's) is told by its log.
  EXPECT_TRUE(std::string_view(cubert::portable::opencl_prelude).ends_with("#line 1 \"source\"\n"));

  auto const own_cl = cubert::kernel::builder("p")
                          .opencl_source("__kernel void own() {}", "own")
                          .portable_source(src, "k")
                          .build();
  EXPECT_EQ(own_cl.opencl_source()->source, "__kernel void own() {}");
  EXPECT_EQ(own_cl.cuda_source()->source, std::string(cubert::portable::cuda_prelude) + src);
  auto const own_ptx =
      cubert::kernel::builder("p").portable_source(src, "k").ptx(".version 8.0", "k").build();
  EXPECT_EQ(own_ptx.cuda_source(), nullptr);
  EXPECT_NE(own_ptx.opencl_source(), nullptr);
  // A portable kernel alone is enough for build().
  EXPECT_NE(both.id(), own_cl.id());
  EXPECT_NE(both.id(), cubert::kernel::builder("p").portable_source(src + " ", "k").build().id());
}
