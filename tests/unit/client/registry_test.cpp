// SPDX-License-Identifier: Apache-2.0
#include "fork_child.hpp"
#include "sanitizers.hpp"

#include <cubert/build_config.hpp>
#include <cubert/client.hpp>
#include <cubert/config.hpp>
#include <cubert/error.hpp>
#include <cubert/logging.hpp>
#if CUBERT_HAS_OPENCL
#include <cubert/opencl.hpp>
#endif

#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

TEST(RegistryTest, CpuIsAlwaysListed) {
  auto const devs = cubert::devices();
  ASSERT_FALSE(devs.empty());
  EXPECT_EQ(devs.front().id, "cpu");
  EXPECT_EQ(devs.front().backend, "cpu");
  EXPECT_FALSE(devs.front().name.empty());
}

TEST(RegistryTest, SameClientForTheSameDevice) {
  auto a = cubert::make_client("cpu");
  auto b = cubert::make_client("cpu:0");
  auto c = cubert::make_client("cpu", {.channel = cubert::channel_kind::actor});
  EXPECT_TRUE(a == b);
  EXPECT_TRUE(a == c);  // The first call decided the channel.
  EXPECT_EQ(c.channel_kind(), a.channel_kind());
}

// The fingerprint names the device in autotune caches: one GPU seen through two backends
// (same name, architecture and driver) runs other kernels there, so it must differ.
TEST(RegistryTest, TheFingerprintTellsBackendsApart) {
  cubert::device_properties cuda;
  cuda.name = "NVIDIA H100";
  cuda.backend = "cuda";
  cuda.architecture = "sm_90";
  cuda.hardware.num_compute_units = 132;
  cuda.driver_version = "580.65";
  auto opencl = cuda;
  opencl.backend = "opencl";
  EXPECT_NE(cuda.fingerprint(), opencl.fingerprint());
  EXPECT_EQ(cuda.fingerprint(), "cuda|NVIDIA H100|sm_90|132|580.65");
  auto const cpu = cubert::make_client("cpu").properties();
  EXPECT_TRUE(cpu.fingerprint().starts_with("cpu|")) << cpu.fingerprint();
  EXPECT_TRUE(cpu.compiler.empty());  // Its kernels come compiled with the program.
}

// Kernels a new run-time compiler makes are new code: their timings are not the old ones'.
TEST(RegistryTest, TheFingerprintNamesTheRunTimeCompiler) {
  cubert::device_properties before;
  before.backend = "cuda";
  before.name = "NVIDIA H200";
  before.compiler = "NVRTC 12.8";
  auto after = before;
  after.compiler = "NVRTC 13.0";
  EXPECT_NE(before.fingerprint(), after.fingerprint());
  EXPECT_TRUE(after.fingerprint().ends_with("|NVRTC 13.0")) << after.fingerprint();
}

TEST(RegistryTest, UnknownOrAbsentDevicesAreUnsupported) {
  EXPECT_THROW((void)cubert::make_client("tpu"), cubert::unsupported);
  EXPECT_THROW((void)cubert::make_client("cpu:1"), cubert::unsupported);
  EXPECT_THROW((void)cubert::make_client("cuda:x"), cubert::unsupported);
  EXPECT_THROW((void)cubert::make_client("cuda:99"), cubert::unsupported);
  try {
    (void)cubert::make_client("tpu");
  } catch (cubert::unsupported const& e) {
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cubert::make_client("cpu").properties().backend, "cpu");  // The registry still works.
}

// An ordinal is spelled as devices() lists it; before 2026-11-26 "cpu:-0" and "cuda:01" were
// taken for cpu:0 and cuda:1.
TEST(RegistryTest, OrdinalsAreDigitsWithoutLeadingZerosOrSigns) {
  for (auto const* id : {"cpu:-0", "cpu:00", "cpu:+0", "cpu:", "cuda:01", "cuda:-0", "cpu:0 ",
                         "cpu: 0", "cuda:4294967296"}) {
    SCOPED_TRACE(id);
    EXPECT_THROW((void)cubert::make_client(id), cubert::unsupported);
  }
  EXPECT_EQ(cubert::make_client("cpu:0").properties().backend, "cpu");
}

// A backend that this build lacks says so rather than calling the device unknown.
// With the backend built, opencl:0 is a client where a device is (PoCL's in CI), and says why
// not elsewhere; without it, that the build lacks it.
TEST(RegistryTest, AnOpenClDeviceIsAClientOrSaysWhyNot) {
#if CUBERT_HAS_OPENCL
  if (cubert::opencl::device_count() > 0) {
    auto const c = cubert::make_client("opencl:0");
    EXPECT_EQ(c.properties().backend, "opencl");
    try {
      (void)cubert::make_client("opencl:4096");
      FAIL();
    } catch (cubert::unsupported const& e) {
      EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
    }
    return;
  }
  std::string const expected = "is not available: ";
#else
  std::string const expected = "no OpenCL backend";
#endif
  try {
    (void)cubert::make_client("opencl:0");
    FAIL();
  } catch (cubert::unsupported const& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

using cubert::test::in_a_fork_child;

// The parent's clients have no threads in a fork() child (an actor channel's refuses every call
// and says to make a new client), so the child's make_client makes its own. Before 2026-11-26 it
// handed back the parent's client, for ever.
TEST(RegistryTest, AForkChildGetsClientsOfItsOwn) {
  if (cubert::test::thread_sanitized) {
    GTEST_SKIP() << "ThreadSanitizer kills a fork() child of a multithreaded process that starts "
                    "threads";
  }
  auto const parents = cubert::make_client("cpu");
  parents.sync();
  auto const other = parents.channel_kind() == cubert::channel_kind::actor
                         ? cubert::channel_kind::mutex
                         : cubert::channel_kind::actor;
  EXPECT_EQ(in_a_fork_child([&] {
              try {
                auto const c = cubert::make_client("cpu", {.channel = other});
                if (c == parents || c.channel_kind() != other) return 2;
                if (!(cubert::make_client("cpu:0") == c)) return 3;  // Cached in the child.
                std::vector<std::byte> const data{std::byte{7}, std::byte{9}};
                auto const h = c.create(data);
                return c.read_one(h.binding()).to_vector() == data ? 0 : 4;
              } catch (std::exception const&) {
                return 5;
              }
            }),
            0);
  EXPECT_EQ(cubert::make_client("cpu") == parents, true);  // The parent's cache is untouched.
}

// The registry's lock is held across fork(): a child forked while another thread makes or looks
// up a client does not inherit it locked.
TEST(RegistryTest, AForkDuringAnotherThreadsLookupDoesNotLockTheChildOut) {
  if (cubert::test::sanitized) {
    // ThreadSanitizer kills such a child; GCC 12's AddressSanitizer does not lock its allocator
    // across fork(), so a child forked while the other thread allocates can hang in malloc.
    GTEST_SKIP() << "the sanitizers' runtimes are not fork-safe while another thread allocates";
  }
  std::atomic<bool> stop{false};
  std::thread looker([&] {
    while (!stop.load()) (void)cubert::make_client("cpu");
  });
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(in_a_fork_child(
                  [] { return cubert::make_client("cpu").properties().backend == "cpu" ? 0 : 1; }),
              0);
  }
  stop = true;
  looker.join();
}

// Every backend is listed; one without a device says why, and the counts agree with devices().
TEST(RegistryTest, BackendsSayWhatTheyFoundAndWhyNot) {
  auto const list = cubert::backends();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].name, "cpu");
  EXPECT_TRUE(list[0].built);
  EXPECT_EQ(list[0].device_count, 1);
  EXPECT_TRUE(list[0].note.empty());
  EXPECT_EQ(list[1].name, "cuda");
  EXPECT_EQ(list[1].built, bool(CUBERT_HAS_CUDA));
  EXPECT_EQ(list[2].name, "opencl");
  EXPECT_EQ(list[2].built, bool(CUBERT_HAS_OPENCL));
  std::size_t listed = 0;
  for (auto const& b : list) {
    SCOPED_TRACE(b.name);
    EXPECT_EQ(b.note.empty(), b.device_count > 0) << b.note;
    if (!b.built) {
      EXPECT_EQ(b.device_count, 0);
    }
    listed += static_cast<std::size_t>(b.device_count);
  }
  EXPECT_EQ(listed, cubert::devices().size());
#if !CUBERT_HAS_CUDA
  EXPECT_NE(list[1].note.find("no CUDA backend"), std::string::npos) << list[1].note;
#endif
}

#if !CUBERT_HAS_CUDA
TEST(RegistryTest, CudaWithoutTheBackendSaysSo) {
  try {
    (void)cubert::make_client("cuda:0");
    FAIL();
  } catch (cubert::unsupported const& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA backend"), std::string::npos) << e.what();
  }
}
#endif

// The registry keeps its clients to the end so that static destructors may use them; what a
// client reads (the configuration, the loggers) must last as long. An exit handler registered
// before cubert's first use runs after cubert's function statics are destroyed: before
// 2026-11-26 it read a freed configuration and copied a destroyed logging state (ASan:
// heap-use-after-free).
void use_cubert_at_exit() {
  auto const c = cubert::make_client("cpu:0");
  c.sync();
  (void)cubert::config::get().channel.spin_us;
  cubert::log::write(cubert::log::category::memory, "at exit");
  std::_Exit(0);
}

TEST(RegistryTest, ClientsWorkFromHandlersThatRunAtExit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto const child = [] {
    std::atexit(use_cubert_at_exit);  // Before any of cubert's statics: it runs after them.
    ::setenv("CUBERT_LOG", "stderr", 1);
    auto const c = cubert::make_client("cpu");
    cubert::log::write(cubert::log::category::memory, "before exit");
    c.sync();
    std::exit(1);  // The handler ends the process with 0.
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "at exit");
}

}  // namespace
