// SPDX-License-Identifier: Apache-2.0
// cubecl's tests/integration_test.rs (§5.2) on the dummy server and on the CPU backend.
#include "byte_helpers.hpp"
#include "dummy_server.hpp"

#include <cubert/client.hpp>

#include <gtest/gtest.h>

namespace {

using namespace cubert;
using test::bytes_of;

class IntegrationTest : public ::testing::TestWithParam<std::string> {
 protected:
  client make() const {
    if (GetParam() == "dummy") return test::dummy_client();
    return make_client(GetParam());
  }
};

TEST_P(IntegrationTest, CreatedResourceIsTheSameWhenRead) {
  auto c = make();
  std::vector<std::uint8_t> data{0, 1, 2};
  auto h = c.create(bytes_of(data));
  EXPECT_EQ(test::values_of<std::uint8_t>(c.read_one(h.binding())), data);
}

TEST_P(IntegrationTest, EmptyAllocatesMemory) {
  auto c = make();
  auto h = c.empty(4);
  EXPECT_EQ(c.read_one(h.binding()).size(), 4u);
}

TEST_P(IntegrationTest, ExecuteElementwiseAddition) {
  auto c = make();
  std::vector<std::uint8_t> lhs{0, 1, 2}, rhs{4, 4, 4};
  auto l = c.create(bytes_of(lhs));
  auto r = c.create(bytes_of(rhs));
  auto out = c.empty(3);
  c.execute(test::dummy_kernels::addition(), cube_count{1},
            bindings{}.with_buffers({l.binding(), r.binding(), out.binding()}));
  EXPECT_EQ(test::values_of<std::uint8_t>(c.read_one(out.binding())),
            (std::vector<std::uint8_t>{4, 5, 6}));
}

TEST_P(IntegrationTest, ExecuteElementwiseMultiplication) {
  auto c = make();
  std::vector<std::uint8_t> lhs{0, 1, 2}, rhs{4, 4, 4};
  auto l = c.create(bytes_of(lhs));
  auto r = c.create(bytes_of(rhs));
  auto out = c.empty(3);
  c.execute(test::dummy_kernels::multiplication(), cube_count{1},
            bindings{}.with_buffers({l.binding(), r.binding(), out.binding()}));
  EXPECT_EQ(test::values_of<std::uint8_t>(c.read_one(out.binding())),
            (std::vector<std::uint8_t>{0, 4, 8}));
}

TEST_P(IntegrationTest, ParameteredKernelReadsItsInfoBuffer) {
  auto c = make();
  std::vector<std::uint8_t> lhs{1, 2}, rhs{10, 20};
  std::vector<std::uint32_t> info{5};
  auto l = c.create(bytes_of(lhs));
  auto r = c.create(bytes_of(rhs));
  auto i = c.create(bytes_of(info));
  auto out = c.empty(2);
  c.execute(test::dummy_kernels::parametered(), cube_count{1},
            bindings{}.with_buffers({l.binding(), r.binding(), out.binding(), i.binding()}));
  EXPECT_EQ(test::values_of<std::uint8_t>(c.read_one(out.binding())),
            (std::vector<std::uint8_t>{16, 27}));
}

INSTANTIATE_TEST_SUITE_P(Backends, IntegrationTest, ::testing::Values("dummy", "cpu"));

}  // namespace
