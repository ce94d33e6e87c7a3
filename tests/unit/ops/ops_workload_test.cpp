// SPDX-License-Identifier: Apache-2.0
// Every operation of the library against its f64 reference on every device present: tuned,
// and each offered candidate alone, for every dtype, on odd and skinny shapes.
#include "ops_device.hpp"

#include <cubert/error.hpp>
#include <cubert/ops/workload.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <iostream>
#include <string_view>

namespace cubert::test {
namespace {

class OpsWorkload : public ::testing::TestWithParam<std::string> {
 public:
  void SetUp() override { ops::configure(test_settings()); }
  void TearDown() override { ops::configure({}); }

  // OpenCL on a CPU (PoCL) compiles each variant for a second or more (a matmul's for several):
  // there the 16-bit dtypes run with a few operations and layouts, and
  // cubert_ops_matmul_source_tests covers every matmul variant of every dtype and layout.
  [[nodiscard]] bool compiles_slowly() const {
    auto const c = make_client(GetParam());
    return c.properties().backend == "opencl" &&
           c.properties().hardware.processor == processor_kind::cpu;
  }

  // Runs candidate `i`; false when the device refuses its cube size for this kernel, which only
  // the compiled kernel knows (OpenCL's CL_KERNEL_WORK_GROUP_SIZE: NVIDIA's allows some of the
  // 512-unit variants only 256). The tuner records such a candidate as failed and never picks
  // it; the test says which it left out. Every other error fails the test.
  static bool runs_here(ops::workload& w, std::size_t i, std::string const& name) {
    try {
      w.run_candidate(i);
      return true;
    } catch (cubert::launch_error const& e) {
      if (std::string_view(e.what()).find("per work-group") == std::string_view::npos) throw;
      std::cout << "[ note ] candidate " << name << " does not run here: " << e.what() << "\n";
      return false;
    }
  }

  // Runs `p` tuned, then every offered candidate alone, each checked against the reference.
  void check_all(ops::problem const& p) {
    auto c = make_client(GetParam());
    ops::workload w(c, p);
    w.run();
    auto why = w.verify();
    ASSERT_FALSE(why) << p.describe() << " on " << GetParam() << ", tuned: " << *why;
    auto const names = w.candidates();
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (!w.offered(i)) continue;
      c.fill(w.output().bound(), std::uint8_t{0x7f});  // A candidate that writes nothing fails.
      if (!runs_here(w, i, names[i])) continue;
      why = w.verify();
      EXPECT_FALSE(why) << p.describe() << " on " << GetParam() << ", candidate " << names[i]
                        << ": " << *why;
    }
  }
};

constexpr elem dtypes[] = {elem::f32, elem::f16, elem::bf16};

TEST_P(OpsWorkload, ElementwiseOperationsMatchTheReference) {
  bool const slow = compiles_slowly();
  for (auto const* op : {"add", "mul", "axpy", "relu", "gelu", "exp"}) {
    for (auto dt : dtypes) {
      if (slow && dt != elem::f32 && std::string_view(op) != "add" &&
          std::string_view(op) != "gelu") {
        continue;
      }
      for (auto const& shape : {std::vector<std::uint64_t>{1}, {1027}, {3, 1031}}) {
        check_all({op, shape, dt, ""});
      }
    }
  }
}

TEST_P(OpsWorkload, ReductionsMatchTheReference) {
  bool const slow = compiles_slowly();
  for (auto const* op : {"sum", "max", "mean"}) {
    for (auto dt : dtypes) {
      if (slow && dt != elem::f32 && std::string_view(op) != "sum") continue;
      for (auto const& shape :
           {std::vector<std::uint64_t>{1, 1}, {7, 13}, {3, 1030}, {33, 5}, {2, 4099}}) {
        check_all({op, shape, dt, "last"});
      }
      check_all({op, {70001}, dt, "all"});
      check_all({op, {5}, dt, "all"});
    }
  }
}

// One test per dtype, so that a device's matmul checks (every candidate of every layout) run in
// parallel under ctest.
void check_matmul(OpsWorkload& t, elem dt) {
  bool const slow = t.compiles_slowly();
  for (auto const* layout : {"rr", "rc", "cr", "cc"}) {
    // PoCL: f32 with both operands transposed, bf16 with neither.
    std::string_view const l = layout;
    if (slow && !((dt == elem::f32 && l == "cc") || (dt == elem::bf16 && l == "rr"))) continue;
    for (auto const& shape : {std::vector<std::uint64_t>{1, 1, 1},
                              {7, 13, 5},
                              {16, 1, 64},
                              {1, 300, 17},
                              {100, 33, 129},
                              {2, 33, 17, 40}}) {
      t.check_all({"matmul", shape, dt, layout});
    }
  }
}

TEST_P(OpsWorkload, MatmulF32MatchesTheReference) {
  check_matmul(*this, elem::f32);
}
TEST_P(OpsWorkload, MatmulF16MatchesTheReference) {
  if (compiles_slowly()) {
    GTEST_SKIP() << "OpenCL on a CPU: cubert_ops_matmul_source_tests checks every f16 variant";
  }
  check_matmul(*this, elem::f16);
}
TEST_P(OpsWorkload, MatmulBf16MatchesTheReference) {
  check_matmul(*this, elem::bf16);
}

// The tuner's choice, run by its number alone, computes the same output; a number past the
// set's end is refused and the workload still runs.
TEST_P(OpsWorkload, TheChoiceRunsByItsNumber) {
  auto c = make_client(GetParam());
  ops::workload w(c, {"matmul", {100, 33, 129}, elem::f32, "rr"});
  w.run();
  auto const choice = w.tuner()->fastest(w.key());
  ASSERT_TRUE(choice);
  c.fill(w.output().bound(), std::uint8_t{0x7f});
  w.run_index(*choice);
  auto why = w.verify();
  EXPECT_FALSE(why) << w.name_of(*choice) << ": " << *why;
  EXPECT_THROW(w.run_index(std::size_t{1} << 40), invalid_argument);
  w.run();
  why = w.verify();
  EXPECT_FALSE(why) << *why;
}

INSTANTIATE_TEST_SUITE_P(Devices, OpsWorkload, ::testing::ValuesIn(ops_devices()), device_label);

}  // namespace
}  // namespace cubert::test
