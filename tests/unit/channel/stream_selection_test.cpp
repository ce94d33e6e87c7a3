// SPDX-License-Identifier: Apache-2.0
// Every channel kind runs a call on its caller's stream: the thread's own, or a bound client's.
#include "channel/channel.hpp"
#include "dummy_server.hpp"
#include "null_server.hpp"

#include <cubert/client.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace cubert;

// A server of four streams that records, for each launch and sync, the stream selected.
class recording_server final : public null::null_server {
 public:
  explicit recording_server(std::shared_ptr<std::vector<std::pair<std::string, std::uint32_t>>> log)
      : log_(std::move(log)) {}
  void select_stream(backend::stream_request const& r) noexcept override {
    selected_ = r.index(stream_count());
    ++selections_;
  }
  [[nodiscard]] std::uint32_t stream_count() const noexcept override { return 4; }
  void execute(kernel const& k, cube_count const&, bindings, execution_mode) override {
    log_->emplace_back(k.name(), selected_);
  }
  std::future<void> sync() override {
    log_->emplace_back("sync", selected_);
    return backend::ready_future();
  }
  std::future<void> sync_device() override {
    log_->emplace_back("sync_device", selected_);
    return backend::ready_future();
  }

 private:
  std::shared_ptr<std::vector<std::pair<std::string, std::uint32_t>>> log_;
  std::uint32_t selected_ = 0;
  std::uint64_t selections_ = 0;
};

kernel named(std::string name) {
  return kernel::builder(std::move(name)).cpu([](cpu::kernel_context const&) {}).build();
}

class StreamSelection : public ::testing::TestWithParam<channel_kind> {
 protected:
  std::shared_ptr<std::vector<std::pair<std::string, std::uint32_t>>> log_ =
      std::make_shared<std::vector<std::pair<std::string, std::uint32_t>>>();
  client make() {
    return client(backend::make_channel(std::make_unique<recording_server>(log_), GetParam()));
  }
};

TEST_P(StreamSelection, ABoundClientRunsOnItsStreamAndTheOthersOnTheThreads) {
  auto const c = make();
  ASSERT_EQ(c.stream_count(), 4U);
  auto const own = c.stream();
  EXPECT_EQ(own, backend::calling_stream().index(4));
  for (std::uint32_t s = 0; s < 4; ++s) {
    auto const bound = c.on_stream(s);
    EXPECT_EQ(bound.stream(), s);
    EXPECT_TRUE(bound == c);
    bound.execute(named("bound"), {1, 1, 1}, {});
    c.execute(named("own"), {1, 1, 1}, {});
    bound.sync();
  }
  c.sync_device();
  ASSERT_EQ(log_->size(), 13U);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ((*log_)[3 * i], (std::pair<std::string, std::uint32_t>{"bound", i}));
    EXPECT_EQ((*log_)[3 * i + 1], (std::pair<std::string, std::uint32_t>{"own", own}));
    EXPECT_EQ((*log_)[3 * i + 2], (std::pair<std::string, std::uint32_t>{"sync", i}));
  }
  EXPECT_EQ(log_->back().first, "sync_device");
  EXPECT_THROW((void)c.on_stream(4), invalid_argument);
}

TEST_P(StreamSelection, ThreadsAreSpreadOverTheStreams) {
  if (GetParam() == channel_kind::single_thread) GTEST_SKIP() << "one thread only";
  auto const c = make();
  std::mutex m;
  std::set<std::uint32_t> seen;
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      auto const mine = c.stream();
      {
        std::lock_guard lock(m);
        seen.insert(mine);
      }
      for (int i = 0; i < 50; ++i) c.execute(named(std::to_string(mine)), {1, 1, 1}, {});
      c.sync();
    });
  }
  for (auto& t : threads) t.join();
  // Four threads numbered one after another cover the four streams.
  EXPECT_EQ(seen.size(), 4U);
  for (auto const& [name, stream] : *log_) {
    if (name != "sync" && name != std::to_string(stream)) ++wrong;
  }
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(log_->size(), 4U * 51U);
}

INSTANTIATE_TEST_SUITE_P(Channels, StreamSelection,
                         ::testing::Values(channel_kind::mutex, channel_kind::actor,
                                           channel_kind::single_thread),
                         [](auto const& p) { return std::string(to_string(p.param)); });

TEST(StreamSelection, ADeviceOfOneStreamHasOnlyStreamZero) {
  auto const c = test::make_dummy_client();
  EXPECT_EQ(c.stream_count(), 1U);
  EXPECT_EQ(c.stream(), 0U);
  EXPECT_EQ(c.on_stream(0).stream(), 0U);
  EXPECT_THROW((void)c.on_stream(1), invalid_argument);
  c.sync_device();
}

}  // namespace
