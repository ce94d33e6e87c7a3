// SPDX-License-Identifier: Apache-2.0
// cubecl's autotune integration tests (docs/maintainer/cubecl-semantics.md §5.2) on the dummy
// server: the slow, wrong candidate must lose, whether the correct one is at index 0 or 1. Unlike
// cubecl, the benchmark inputs are fresh buffers, so tuning never writes into the caller's output.
#include "byte_helpers.hpp"
#include "channel/channel.hpp"
#include "dummy_server.hpp"
#include "tune_fixture.hpp"

#include <cubert/client.hpp>
#include <cubert/cpu.hpp>
#include <cubert/graph.hpp>
#include <cubert/tune/local_tuner.hpp>
#include <cubert/tune/tune_cache_store.hpp>

#include <gtest/gtest.h>

namespace {

using cubert::handle;
using cubert::test::bytes_of;
using cubert::test::values_of;
namespace kernels = cubert::test::dummy_kernels;
using set_t = cubert::tune::tunable_set<std::string, void, handle, handle, handle>;

class DummyAutotuneTest : public cubert::test::tune_fixture {};

// cubecl's log_shape_input_key: the next power of two of each dimension.
std::string shape_key(std::string const& prefix, handle const& lhs) {
  std::uint64_t p = 1;
  while (p < lhs.size()) p *= 2;
  return prefix + "-" + std::to_string(p) + ",";
}

set_t make_set(cubert::client client, std::string prefix, cubert::kernel first,
               cubert::kernel second) {
  auto launch = [client](cubert::kernel k) {
    return [client, k](handle l, handle r, handle o) {
      client.execute(k, cubert::cube_count{1},
                     cubert::bindings{}.with_buffers({l.binding(), r.binding(), o.binding()}));
    };
  };
  return set_t([prefix](handle const& l, handle const&,
                        handle const&) { return shape_key(prefix, l); },
               [client](std::string const&, handle const& l, handle const& r, handle const& o) {
                 return std::tuple<handle, handle, handle>{
                     client.empty(l.size()), client.empty(r.size()), client.empty(o.size())};
               })
      .with(first.name(), launch(first))
      .with(second.name(), launch(second));
}

TEST_F(DummyAutotuneTest, BasicAdditionExecution) {
  auto client = cubert::test::make_dummy_client();
  cubert::tune::local_tuner<std::string> tuner("autotune_basic_addition_execution", options());
  auto set = tuner.init(
      [&] { return make_set(client, "add", kernels::addition(), kernels::addition_slow_wrong()); });
  std::vector<std::uint8_t> const lhs{0, 1, 2};
  std::vector<std::uint8_t> const rhs{4, 4, 4};
  auto out = client.empty(3);
  tuner.execute("test", client, set, client.create(bytes_of(lhs)), client.create(bytes_of(rhs)),
                out);
  EXPECT_EQ(values_of<std::uint8_t>(client.read_one(out.binding())),
            (std::vector<std::uint8_t>{4, 5, 6}));
  EXPECT_EQ(tuner.tuner_for("test", client)->fastest("add-4,"), 0U);
}

TEST_F(DummyAutotuneTest, BasicMultiplicationExecution) {
  auto client = cubert::test::make_dummy_client();
  cubert::tune::local_tuner<std::string> tuner("autotune_basic_multiplication_execution",
                                               options());
  auto set = tuner.init([&] {
    return make_set(client, "mul", kernels::multiplication_slow_wrong(), kernels::multiplication());
  });
  std::vector<std::uint8_t> const lhs{0, 1, 2};
  std::vector<std::uint8_t> const rhs{4, 4, 4};
  auto out = client.empty(3);
  tuner.execute("test", client, set, client.create(bytes_of(lhs)), client.create(bytes_of(rhs)),
                out);
  EXPECT_EQ(values_of<std::uint8_t>(client.read_one(out.binding())),
            (std::vector<std::uint8_t>{0, 4, 8}));
  EXPECT_EQ(tuner.tuner_for("test", client)->fastest("mul-4,"), 1U);
}

TEST_F(DummyAutotuneTest, FailingKernelIsSkipped) {
  auto client = cubert::test::make_dummy_client();
  cubert::tune::local_tuner<std::string> tuner("dummy_failing", options(false));
  auto set =
      tuner.init([&] { return make_set(client, "add", kernels::failing(), kernels::addition()); });
  std::vector<std::uint8_t> const lhs{1, 2};
  auto out = client.empty(2);
  tuner.execute("test", client, set, client.create(bytes_of(lhs)), client.create(bytes_of(lhs)),
                out);
  EXPECT_EQ(values_of<std::uint8_t>(client.read_one(out.binding())),
            (std::vector<std::uint8_t>{2, 4}));
  auto const results = tuner.tuner_for("test", client)->results("add-2,");
  ASSERT_EQ(results.size(), 2U);
  EXPECT_EQ(results[0].status, cubert::tune::candidate_status::failed);
}

// Inside a capture nothing runs, so candidates cannot be timed. A key not tuned yet was tuned
// anyway: every candidate failed (their profiles refused), the failures were stored in the
// persistent cache, and the capture was lost to an autotune_error blaming them. It is refused
// now, before anything is recorded or stored; a key tuned before is captured with its winner.
TEST_F(DummyAutotuneTest, AKeyNotTunedYetIsRefusedInsideACaptureAndATunedOneIsCaptured) {
  auto client = cubert::test::make_dummy_client();
  cubert::tune::local_tuner<std::string> tuner("dummy_capture", options());
  auto set = tuner.init(
      [&] { return make_set(client, "add", kernels::addition(), kernels::addition_slow_wrong()); });
  auto const lhs = client.create(bytes_of(std::vector<std::uint8_t>{0, 1, 2}));
  auto const rhs = client.create(bytes_of(std::vector<std::uint8_t>{4, 4, 4}));
  auto const out = client.empty(3);
  auto const tune_inside = [&] {
    return client.capture([&] { tuner.execute("test", client, set, lhs, rhs, out); });
  };
  try {
    (void)tune_inside();
    ADD_FAILURE() << "tuning inside a capture was not refused";
  } catch (cubert::invalid_argument const& e) {
    EXPECT_NE(std::string(e.what()).find("capturing a graph"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(client.capturing());
  EXPECT_TRUE(cubert::tune::list_cache(dir_).empty()) << "the refusal was stored";
  tuner.execute("test", client, set, lhs, rhs, out);  // Tuned outside.
  EXPECT_EQ(tuner.tuner_for("test", client)->fastest("add-4,"), 0U);
  client.fill(out.binding(), std::uint8_t{0});
  cubert::graph const g = tune_inside();
  EXPECT_EQ(g.size(), 1U);
  EXPECT_EQ(values_of<std::uint8_t>(client.read_one(out.binding())),
            (std::vector<std::uint8_t>{0, 0, 0}));
  client.replay(g);
  EXPECT_EQ(values_of<std::uint8_t>(client.read_one(out.binding())),
            (std::vector<std::uint8_t>{4, 5, 6}));
}

// On the CPU server a failing launch fails its profile window and is also kept for the next
// sync, read or flush. The tuner charged it to the failing candidate through the profile and
// then left it queued: the next candidate's warm-up sync took it (and failed a good candidate),
// or, when the failing one came last, the caller's own next read did.
class CpuAutotuneFailure : public cubert::test::tune_fixture,
                           public ::testing::WithParamInterface<bool> {};

TEST_P(CpuAutotuneFailure, IsChargedOnlyToTheFailingCandidate) {
  bool const failing_first = GetParam();
  cubert::client client(
      cubert::backend::make_channel(cubert::cpu::make_server({}), cubert::channel_kind::mutex));
  cubert::tune::local_tuner<std::string> tuner("cpu_failing", options(false));
  auto set = tuner.init([&] {
    return failing_first ? make_set(client, "add", kernels::failing(), kernels::addition())
                         : make_set(client, "add", kernels::addition(), kernels::failing());
  });
  std::vector<std::uint8_t> const lhs{1, 2};
  auto out = client.empty(2);
  ASSERT_NO_THROW(tuner.execute("test", client, set, client.create(bytes_of(lhs)),
                                client.create(bytes_of(lhs)), out));
  std::vector<std::uint8_t> got;
  ASSERT_NO_THROW(got = values_of<std::uint8_t>(client.read_one(out.binding())))
      << "the benchmark's failure reached the caller's read";
  EXPECT_EQ(got, (std::vector<std::uint8_t>{2, 4}));
  auto const results = tuner.tuner_for("test", client)->results("add-2,");
  ASSERT_EQ(results.size(), 2U);
  std::size_t const bad = failing_first ? 0 : 1;
  EXPECT_EQ(results[bad].status, cubert::tune::candidate_status::failed);
  EXPECT_EQ(results[1 - bad].status, cubert::tune::candidate_status::ok) << results[1 - bad].error;
  EXPECT_NO_THROW(client.sync());
}

INSTANTIATE_TEST_SUITE_P(Orders, CpuAutotuneFailure, ::testing::Bool(), [](auto const& param_info) {
  return param_info.param ? std::string("failing_first") : std::string("failing_last");
});

}  // namespace
