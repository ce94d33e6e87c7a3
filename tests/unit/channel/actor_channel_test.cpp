// SPDX-License-Identifier: Apache-2.0
// The actor channel's waits: replies that come while the caller spins and after it sleeps,
// errors on both paths, and a server thread that sleeps once its queue stays empty.
#include "channel/actor_channel.hpp"

#include "channel/channel.hpp"
#include "dummy_server.hpp"
#include "fork_child.hpp"
#include "sanitizers.hpp"

#include <cubert/client.hpp>
#include <cubert/cpu.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using namespace cubert;
using namespace std::chrono_literals;

client actor_client() {
  cpu::options opts;
  opts.threads = 1;
  return client(backend::make_channel(cpu::make_server(opts), cubert::channel_kind::actor));
}

// `[channel] spin_us = 0`: every wait sleeps at once.
client sleeping_actor_client() {
  cpu::options opts;
  opts.threads = 1;
  return client(std::make_shared<backend::actor_channel>(cpu::make_server(opts), 0us));
}

void sleep_20ms(cpu::kernel_context const&) {
  std::this_thread::sleep_for(20ms);
}

// Waits until `flag` is set, for at most 10 s: ample on a loaded machine, and a lost signal
// still ends the test (which then fails on what it checks) instead of hanging it.
void wait_for(std::atomic<bool> const& flag) {
  auto const deadline = std::chrono::steady_clock::now() + 10s;
  while (!flag.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100us);
  }
}

// A kernel that holds the server thread until `go`, then 20 ms more: what the caller queues
// before setting `go` waits behind it however late the caller runs.
kernel sleep_20ms_after(std::shared_ptr<std::atomic<bool>> const& go) {
  return kernel::builder("test::sleep_20ms_after_go")
      .cpu([go](cpu::kernel_context const&) {
        wait_for(*go);
        std::this_thread::sleep_for(20ms);
      })
      .build();
}

std::chrono::nanoseconds process_cpu_time() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

TEST(ActorChannel, BlockingCallsInABurstGetTheirOwnReplies) {
  auto c = actor_client();
  std::vector<handle> handles;
  for (std::uint64_t i = 1; i <= 2000; ++i) handles.push_back(c.empty(i * 8));
  for (std::uint64_t i = 1; i <= 2000; ++i) {
    ASSERT_EQ(handles[i - 1].size(), i * 8);
  }
  EXPECT_FALSE(c.memory_report().empty());  // A reply of a non-trivial type.
  c.flush();                                // And of none.
}

TEST(ActorChannel, AReplyLongerThanTheSpinStillArrives) {
  auto c = actor_client();
  // The kernel keeps the server thread until the caller is about to call, then 20 ms more: with a
  // plain 20 ms kernel, a caller descheduled after `execute` (a loaded machine) found it done.
  auto const go = std::make_shared<std::atomic<bool>>(false);
  auto const slow = sleep_20ms_after(go);
  c.execute(slow, cube_count{1}, bindings{});
  auto const start = std::chrono::steady_clock::now();
  go->store(true);
  // Queued behind the kernel: the caller outlasts its spin and sleeps.
  auto const usage = c.memory_usage();
  auto const waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(usage.bytes_in_use, 0u);
  EXPECT_GE(waited, 10ms);
}

// Calls that only make new memory do not wait for the queue: the caller takes the server
// between two kernels, long before the twenty queued ones have run, and gets usable memory.
TEST(ActorChannel, NewMemoryIsMadeBetweenTwoMessagesNotBehindTheQueue) {
  auto c = actor_client();
  auto const done = std::make_shared<std::atomic<int>>(0);
  auto const k = kernel::builder("test::sleep_20ms_and_count")
                     .cpu([done](cpu::kernel_context const&) {
                       std::this_thread::sleep_for(20ms);
                       done->fetch_add(1);
                     })
                     .build();
  for (int i = 0; i < 20; ++i) c.execute(k, cube_count{1}, bindings{});
  auto const h = c.empty(64);
  std::vector<std::byte> const bytes(32, std::byte{7});
  auto const made = c.create(bytes);
  auto const pinned = c.alloc_host(128);
  int const ran = done->load();
  EXPECT_LT(ran, 20) << "the calls waited for the whole queue";
  EXPECT_EQ(h.size(), 64u);
  EXPECT_EQ(pinned.size(), 128u);
  auto const back = c.read_one(made.binding());  // Queued: after every kernel.
  EXPECT_EQ(done->load(), 20);
  EXPECT_EQ(std::vector<std::byte>(back.begin(), back.end()), bytes);
}

TEST(ActorChannel, ErrorsReachTheCallerOnBothPathsAndTheChannelGoesOn) {
  auto c = actor_client();
  EXPECT_THROW((void)c.empty(std::uint64_t{1} << 62), out_of_memory);  // Replied while spinning.
  auto slow = kernel::builder("test::sleep_20ms").cpu(sleep_20ms).build();
  c.execute(slow, cube_count{1}, bindings{});
  EXPECT_THROW((void)c.empty(std::uint64_t{1} << 62), out_of_memory);  // After sleeping.
  auto h = c.create(std::vector<std::byte>(16, std::byte{7}));
  auto got = c.read_one(h.binding());
  ASSERT_EQ(got.size(), 16u);
  EXPECT_EQ(got.data()[15], std::byte{7});
}

TEST(ActorChannel, WithoutASpinEveryWaitSleepsAndStillGetsItsReply) {
  auto c = sleeping_actor_client();
  std::vector<handle> handles;
  for (std::uint64_t i = 1; i <= 200; ++i) handles.push_back(c.empty(i * 8));
  for (std::uint64_t i = 1; i <= 200; ++i) EXPECT_EQ(handles[i - 1].size(), i * 8);
  auto slow = kernel::builder("test::sleep_20ms").cpu(sleep_20ms).build();
  c.execute(slow, cube_count{1}, bindings{});
  EXPECT_THROW((void)c.empty(std::uint64_t{1} << 62), out_of_memory);
  auto h = c.create(std::vector<std::byte>(8, std::byte{9}));
  EXPECT_EQ(c.read_one(h.binding()).data()[7], std::byte{9});
}

TEST(ActorChannel, AnIdleServerThreadSleeps) {
  auto c = actor_client();
  for (int i = 0; i < 100; ++i) (void)c.empty(256);
  std::this_thread::sleep_for(5ms);  // Past the server thread's spin.
  auto const before = process_cpu_time();
  std::this_thread::sleep_for(200ms);
  auto const used = process_cpu_time() - before;
  // A spinning thread would use ~200 ms here; a sleeping one next to nothing.
  EXPECT_LT(used, 50ms) << "process CPU time while idle: " << used.count() << " ns";
}

// The server thread's voluntary context switches (times it blocked: yields do not count), read
// on that thread by a blocking call; CPU time would depend on what else the machine runs.
struct server_sleep_counter {
  std::shared_ptr<std::atomic<long>> count = std::make_shared<std::atomic<long>>(-1);
  void install(test::dummy_server& s) const {
    s.on_memory_usage = [n = count] {
      rusage u{};
      getrusage(RUSAGE_THREAD, &u);
      n->store(u.ru_nvcsw);
    };
  }
  long read(client const& c) const {
    (void)c.memory_usage();
    return count->load();
  }
};

// An actor client over a dummy server whose sync waits `wait` in the reply's get(), on the
// caller's thread (as CUDA's does), and whose server thread's sleeps `sleeps` counts.
client waiting_on_the_caller(server_sleep_counter const& sleeps, std::chrono::milliseconds wait,
                             std::chrono::microseconds budget) {
  auto server = std::make_unique<test::dummy_server>();
  sleeps.install(*server);
  server->on_sync = [wait] {
    return std::async(std::launch::deferred, [wait] { std::this_thread::sleep_for(wait); });
  };
  return client(std::make_shared<backend::actor_channel>(std::move(server), budget));
}

// A caller waiting on the device after a sync (CUDA waits in the reply's get(), on the caller's
// thread) posts again once it is done: the server thread stays up for it instead of sleeping
// after one budget (the caller's next launch then paid for waking it)...
// A loaded machine (the GPU host runs 16 suites at once) can block a thread once on a lock or a
// page fault: a switch counted there is retried; a thread that sleeps by design does every time.
constexpr int attempts = 3;

TEST(ActorChannel, WhileACallerWaitsOnTheDeviceTheServerThreadStaysUp) {
  long slept = 0;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    server_sleep_counter const sleeps;
    auto const c = waiting_on_the_caller(sleeps, 200ms, 50ms);  // Within the 1 s cap.
    auto const before = sleeps.read(c);
    c.sync();
    slept = sleeps.read(c) - before;
    if (slept == 0) break;
  }
  EXPECT_EQ(slept, 0) << "the server thread slept while its caller waited, " << attempts
                      << " times out of " << attempts;
}

// ...but not past its cap, and the cap counts from the wait's start: another thread posting
// every 20 ms restarted it, and the server thread spun through the whole wait.
TEST(ActorChannel, TheServerThreadsStayUpEndsAtItsCapWhateverElseIsPosted) {
  server_sleep_counter const sleeps;
  auto const c = waiting_on_the_caller(sleeps, 600ms, 2ms);  // Up for 40 ms of the 600 ms.
  auto const noop = kernel::builder("test::noop").cpu([](cpu::kernel_context const&) {}).build();
  auto const before = sleeps.read(c);
  std::atomic<bool> done{false};
  std::thread poster([&] {
    while (!done.load()) {
      c.execute(noop, cube_count{1}, bindings{});
      std::this_thread::sleep_for(20ms);
    }
  });
  c.sync();
  done.store(true);
  poster.join();
  // Past the cap it sleeps after each post's budget: ~28 times. Without a cap per wait it never
  // slept for the wait (a blocked lock, once or twice, is what else shows up here).
  EXPECT_GE(sleeps.read(c) - before, 8) << "the server thread spun through a 600 ms wait";
}

// A caller whose reply is queued behind a backlog the server thread is working through spins on
// while the backlog moves, instead of sleeping after one budget and paying a wake-up at the end.
TEST(ActorChannel, ACallerBehindAMovingBacklogDoesNotSleep) {
  if (test::sanitized) GTEST_SKIP() << "sanitizer runtimes take locks of their own";
  client c(std::make_shared<backend::actor_channel>(std::make_unique<test::dummy_server>(), 200ms));
  auto const busy_2ms = kernel::builder("test::busy_2ms")
                            .cpu([](cpu::kernel_context const&) {
                              auto const end = std::chrono::steady_clock::now() + 2ms;
                              while (std::chrono::steady_clock::now() < end) {
                              }
                            })
                            .build();
  auto const sleeps = [] {
    rusage u{};
    getrusage(RUSAGE_THREAD, &u);
    return u.ru_nvcsw;  // Voluntary switches: this thread blocked.
  };
  long slept = 0;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    for (int i = 0; i < 300; ++i) c.execute(busy_2ms, cube_count{1}, bindings{});  // ~600 ms
    auto const before = sleeps();
    c.sync();
    slept = sleeps() - before;
    if (slept == 0) break;
  }
  EXPECT_EQ(slept, 0) << "the caller slept though the backlog kept moving, " << attempts
                      << " times out of " << attempts;
}

// Destroyed with a message still queued, the server thread served it and then spun its whole
// budget (a second at `spin_us = 1000000`) waiting for messages nobody could post any more.
TEST(ActorChannel, DestroyedWithWorkQueuedItDoesNotSpinOutItsBudget) {
  cpu::options opts;
  opts.threads = 1;
  std::optional<client> c(std::in_place,
                          std::make_shared<backend::actor_channel>(cpu::make_server(opts), 1s));
  auto const go = std::make_shared<std::atomic<bool>>(false);
  c->execute(sleep_20ms_after(go), cube_count{1}, bindings{});
  c->execute(kernel::builder("test::sleep_20ms").cpu(sleep_20ms).build(), cube_count{1},
             bindings{});  // Still queued when the client goes.
  go->store(true);
  auto const start = std::chrono::steady_clock::now();
  c.reset();
  auto const took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, 500ms) << "destruction took "
                         << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                         << " ms";
}

// What a message captured (here `read_into`'s binding) is released once the message has run, not
// with its whole batch: a call queued behind it must not count memory the caller already dropped.
TEST(ActorChannel, AMessageReleasesWhatItHoldsOnceItHasRun) {
  auto c = actor_client();
  constexpr std::uint64_t size = 1 << 20;
  auto const baseline = c.memory_usage().bytes_in_use;
  std::optional<handle> h = c.empty(size);
  std::vector<std::byte> dst(size);
  // The kernel holds the server thread until the read is queued and the handle dropped, then
  // 20 ms more for `memory_usage` to be queued too: what follows is taken in one batch, however
  // late this thread runs (a plain 20 ms kernel could end first on a loaded machine).
  auto const go = std::make_shared<std::atomic<bool>>(false);
  auto const slow = sleep_20ms_after(go);
  c.execute(slow, cube_count{1}, bindings{});
  auto done = c.read_into_async(h->binding(), dst);
  h.reset();
  go->store(true);
  auto const usage = c.memory_usage();
  done.get();
  EXPECT_EQ(usage.bytes_in_use, baseline);
}

// A graph's last copy goes on the server thread (a kernel's CPU body held it) while a replay of
// it is queued behind that kernel: the drop reached the server at once, ahead of the replay,
// which the server then refused ("no graph"), and the next sync threw.
TEST(ActorChannel, AGraphDroppedOnTheServerThreadGoesAfterItsQueuedReplays) {
  auto server = std::make_unique<test::dummy_server>();
  server->own_graphs = true;
  client c(backend::make_channel(std::move(server), cubert::channel_kind::actor));
  auto const replays = std::make_shared<std::atomic<int>>(0);
  auto const counted = kernel::builder("test::counted")
                           .cpu([replays](cpu::kernel_context const&) { replays->fetch_add(1); })
                           .build();
  std::optional<graph> g = c.capture([&] { c.execute(counted, cube_count{1}, bindings{}); });
  auto const go = std::make_shared<std::atomic<bool>>(false);
  std::optional<kernel> holder =
      kernel::builder("test::holds_the_graph")
          .cpu([go, kept = *g](cpu::kernel_context const&) { wait_for(*go); })
          .build();
  c.execute(*holder, cube_count{1}, bindings{});
  c.replay(*g);
  g.reset();
  holder.reset();  // the queued kernel holds the graph's last copy now
  go->store(true);
  EXPECT_NO_THROW(c.sync());
  EXPECT_EQ(replays->load(), 1);
}

using cubert::test::in_a_fork_child;

// The child has no server thread (nor CPU workers): a call waited for ever for its reply, and
// destroying the client waited for ever to join threads that are not there.
TEST(ActorChannel, InAForkChildItsClientRefusesAndGoesWithoutHanging) {
  std::optional<client> c = actor_client();
  auto const h = c->empty(64);
  EXPECT_EQ(in_a_fork_child([&] {
              try {
                (void)c->memory_usage();
                return 1;
              } catch (device_error const& e) {
                if (std::string(e.what()).find("made before fork()") == std::string::npos) {
                  return 2;
                }
              }
              c.reset();
              return 0;
            }),
            0);
  EXPECT_EQ(c->read_one(h.binding()).size(), 64u);  // the parent's goes on
}

TEST(MutexChannel, InAForkChildACpuClientWithWorkersGoesWithoutHanging) {
  cpu::options opts;
  opts.threads = 4;
  std::optional<client> c =
      client(backend::make_channel(cpu::make_server(opts), cubert::channel_kind::mutex));
  c->execute(kernel::builder("test::nothing").cpu([](cpu::kernel_context const&) {}).build(),
             cube_count{8}, bindings{});
  c->sync();
  std::this_thread::sleep_for(20ms);  // past the workers' spin: they wait on the pool's condition
  EXPECT_EQ(in_a_fork_child([&] {
              c.reset();
              return 0;
            }),
            0);
  c->sync();
}

// A CPU kernel that captured its client, with every other copy dropped while it is queued: the
// message holds the last copy, so the channel is destroyed on its own server thread. It used to
// join that very thread (std::terminate); now the thread serves what is queued and ends.
TEST(ActorChannel, AMessageHoldingTheLastClientEndsTheChannelOnItsOwnThread) {
  std::atomic<int> ran{0};
  std::atomic<bool> dropped{false};
  auto sentinel = std::make_shared<int>(0);
  std::weak_ptr<int> const watch = sentinel;
  {
    auto c = actor_client();
    auto holder = kernel::builder("test::holds_its_client")
                      .cpu([keep = c, &ran, &dropped](cpu::kernel_context const&) {
                        wait_for(dropped);  // Still running when `c` is dropped.
                        ran.fetch_add(1);
                      })
                      .build();
    auto after =
        kernel::builder("test::queued_behind")
            .cpu([s = std::move(sentinel), &ran](cpu::kernel_context const&) { ran.fetch_add(1); })
            .build();
    c.execute(holder, cube_count{1}, bindings{});
    c.execute(after, cube_count{1}, bindings{});
  }
  dropped = true;
  // Both kernels run and their messages die with the server thread's queue.
  auto const deadline = std::chrono::steady_clock::now() + 10s;
  while (!watch.expired() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(watch.expired()) << "the queued kernel was never destroyed";
  EXPECT_EQ(ran.load(), 2);
  std::this_thread::sleep_for(20ms);  // Lets the detached thread finish destroying its server.
}

// Set by the exit handler of the test below, read by its kernel.
std::atomic<bool> exit_reached{false};

// The process exits while a message still holds a client's last copy: the keeper of orphaned
// threads is destroyed first (it had nothing to join), and only then does the message end and
// the channel die on its own thread. That thread used to add itself to the destroyed keeper's
// vector under its destroyed mutex; it now finds the keeper closed and is detached. The exit
// handler is registered before the channel exists, so it runs after the keeper's destructor.
TEST(ActorChannel, AServerThreadOrphanedAfterTheKeeperIsGoneDoesNotTouchIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto const exit_while_held = [] {
    std::atexit(+[] {
      exit_reached.store(true);
      // Time for the kernel to return and the channel to die on its thread, which no one joins.
      std::this_thread::sleep_for(200ms);
    });
    {
      auto c = actor_client();
      auto holder = kernel::builder("test::holds_its_client_past_exit")
                        .cpu([keep = c](cpu::kernel_context const&) { wait_for(exit_reached); })
                        .build();
      c.execute(holder, cube_count{1}, bindings{});
    }
    std::exit(0);
  };
  EXPECT_EXIT(exit_while_held(), ::testing::ExitedWithCode(0), "");
}

// The same, with the process exiting at once: the orphaned server thread is joined at exit, so
// the work queued behind the kernel still runs and its captures are destroyed before the process
// ends (a detached thread would be cut off). Run in a fresh process, which the exit ends.
TEST(ActorChannel, AnOrphanedServerThreadFinishesBeforeTheProcessExits) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // The child re-runs this body in a new process: the parent's pid, passed down, names the file.
  if (std::getenv("CUBERT_TEST_PARENT_PID") == nullptr) {
    ::setenv("CUBERT_TEST_PARENT_PID", std::to_string(::getpid()).c_str(), 1);
  }
  auto const marker =
      std::filesystem::temp_directory_path() /
      (std::string("cubert-actor-exit-") + std::getenv("CUBERT_TEST_PARENT_PID") + ".txt");
  std::filesystem::remove(marker);
  auto const orphan_then_exit = [&] {
    // Signals, not sleeps, order the steps: on a loaded machine a 50 ms kernel could end before
    // the last other copy was dropped, or still run when the process exits (not yet orphaned,
    // hence not joined at exit).
    auto const dropped = std::make_shared<std::atomic<bool>>(false);
    auto const slow_started = std::make_shared<std::atomic<bool>>(false);
    {
      auto c = actor_client();
      auto holder = kernel::builder("test::holds_its_client")
                        .cpu([keep = c, dropped](cpu::kernel_context const&) {
                          wait_for(*dropped);  // Until every other copy is gone.
                        })
                        .build();
      // Destroyed with its message, after it ran, on the orphaned thread.
      std::shared_ptr<int> const note(new int(0), [marker](int* p) {
        std::ofstream(marker) << "finished";
        delete p;
      });
      auto slow = kernel::builder("test::slow_behind")
                      .cpu([note, slow_started](cpu::kernel_context const&) {
                        slow_started->store(true);
                        std::this_thread::sleep_for(100ms);
                      })
                      .build();
      c.execute(holder, cube_count{1}, bindings{});
      c.execute(slow, cube_count{1}, bindings{});
    }
    dropped->store(true);
    // The holder's message dies with the last client, on the server thread, before the slow
    // kernel starts (each message is released once it has run): exit while the slow one runs.
    wait_for(*slow_started);
    std::exit(0);
  };
  EXPECT_EXIT(orphan_then_exit(), ::testing::ExitedWithCode(0), "");
  std::ifstream in(marker);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "finished");
  std::filesystem::remove(marker);
}

}  // namespace
