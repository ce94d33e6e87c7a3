// SPDX-License-Identifier: Apache-2.0
// A call that passed the profiling check just before another thread starts a profile: the
// profile waits for it, so its work is not measured (cubecl's guard lets it in).
#include <cubert/backend/channel.hpp>
#include <cubert/client.hpp>
#include <cubert/cpu.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace cubert;
using namespace std::chrono_literals;

// Forwards to a CPU channel; `execute` stalls at its start for as long as `hold` is set (a
// thread preempted between the client's check and its channel call), and the order in which
// launches and profile starts reach the channel is kept.
class stalling_channel final : public backend::channel {
 public:
  explicit stalling_channel(std::shared_ptr<backend::channel> inner) : inner_(std::move(inner)) {}

  std::atomic<bool> hold{false};
  std::atomic<bool> stalled{false};

  std::vector<std::string> events() {
    std::lock_guard lock(mutex_);
    return events_;
  }

  backend::channel_kind kind() const noexcept override { return inner_->kind(); }
  handle create(std::span<std::byte const> data) override { return inner_->create(data); }
  std::vector<backend::tensor_allocation> create_tensors(
      std::vector<std::span<std::byte const>> const& data,
      std::vector<backend::tensor_descriptor> const& descriptors) override {
    return inner_->create_tensors(data, descriptors);
  }
  handle empty(std::uint64_t size) override { return inner_->empty(size); }
  std::vector<backend::tensor_allocation> empty_tensors(
      std::vector<backend::tensor_descriptor> const& descriptors) override {
    return inner_->empty_tensors(descriptors);
  }
  std::future<std::vector<bytes>> read(std::vector<binding> bindings) override {
    return inner_->read(std::move(bindings));
  }
  std::future<std::vector<bytes>> read_tensor(std::vector<binding_with_meta> tensors) override {
    return inner_->read_tensor(std::move(tensors));
  }
  std::future<void> read_into(binding const& b, std::span<std::byte> dst) override {
    return inner_->read_into(b, dst);
  }
  host_buffer alloc_host(std::uint64_t size) override { return inner_->alloc_host(size); }
  void execute(kernel const& k, cube_count const& count, bindings args,
               execution_mode mode) override {
    stalled = true;
    while (hold.load()) std::this_thread::sleep_for(1ms);
    record("execute");
    inner_->execute(k, count, std::move(args), mode);
  }
  void flush() override { inner_->flush(); }
  std::future<void> sync() override { return inner_->sync(); }
  backend::binding_resource get_resource(binding const& b) override {
    return inner_->get_resource(b);
  }
  memory::memory_usage memory_usage() override { return inner_->memory_usage(); }
  std::string memory_report() override { return inner_->memory_report(); }
  void memory_cleanup() override { inner_->memory_cleanup(); }
  profiling_token start_profile() override {
    record("start_profile");
    return inner_->start_profile();
  }
  profile_duration end_profile(profiling_token token) override {
    return inner_->end_profile(token);
  }
  device_properties const& properties() const noexcept override { return inner_->properties(); }

 private:
  void record(std::string what) {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(what));
  }

  std::shared_ptr<backend::channel> inner_;
  std::mutex mutex_;
  std::vector<std::string> events_;
};

void nothing(cpu::kernel_context const&) {}

TEST(ProfileWindow, ALaunchPastTheCheckFinishesBeforeAnotherThreadsProfileStarts) {
  for (auto const kind : {backend::channel_kind::mutex, backend::channel_kind::actor}) {
    cpu::options opts;
    opts.threads = 1;
    auto gate =
        std::make_shared<stalling_channel>(backend::make_channel(cpu::make_server(opts), kind));
    client const c(gate);
    auto const k = kernel::builder("test::nothing").cpu(nothing).build();

    gate->hold = true;
    std::thread launcher([&] { c.execute(k, cube_count{1}, bindings{}); });
    while (!gate->stalled.load()) std::this_thread::yield();
    std::thread profiler([&] { (void)c.profile([] {}, "window"); });
    // Long enough for the profile to start if nothing held it back.
    std::this_thread::sleep_for(50ms);
    gate->hold = false;
    launcher.join();
    profiler.join();
    c.sync();

    auto const events = gate->events();
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0], "execute") << to_string(kind) << ": the launch landed inside the profile";
    EXPECT_EQ(events[1], "start_profile");
  }
}

// The profiling thread's own calls are never held back by the count, nested or not.
TEST(ProfileWindow, TheProfilingThreadsOwnCallsAndNestedProfilesProceed) {
  cpu::options opts;
  opts.threads = 1;
  client const c(backend::make_channel(cpu::make_server(opts), backend::channel_kind::mutex));
  auto const k = kernel::builder("test::nothing").cpu(nothing).build();
  int inner_ran = 0;
  int outer_ran = 0;  // The check inside the body counts only if the body ran to its end.
  auto const outer = c.profile(
      [&] {
        c.execute(k, cube_count{1}, bindings{});
        (void)c.profile(
            [&] {
              c.execute(k, cube_count{1}, bindings{});
              ++inner_ran;
            },
            "inner");
        auto h = c.empty(16);
        EXPECT_EQ(c.read_one(h.binding()).size(), 16u);
        ++outer_ran;
      },
      "outer");
  (void)outer;
  c.sync();
  EXPECT_EQ(inner_ran, 1);
  EXPECT_EQ(outer_ran, 1);
}

}  // namespace
