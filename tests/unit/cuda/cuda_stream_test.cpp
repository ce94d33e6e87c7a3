// SPDX-License-Identifier: Apache-2.0
// A server on the caller's stream (cuda::options::stream): its copies and waits are ordered with
// what the stream's owner queues there, and the stream outlives the server. Runs on a device and
// on the fake driver (ctest `cuda_stream_fake_driver`); skipped where neither is present.
#include "channel/channel.hpp"
#include "cuda_library.hpp"
#include "cuda_server.hpp"
#include "cuda_storage.hpp"
#include "failing_new.hpp"
#include "fake_driver_hooks.hpp"
#include "owned_stream.hpp"
#include "stream_gate.hpp"

#include <cubert/client.hpp>
#include <cubert/cuda.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using cubert::cuda::detail::cuda_server;
using cubert::cuda::detail::driver;

// Holds the stream's next operations back for a while, like a long kernel of the owner's.
void CUDA_CB hold_then_mark(void* flag) {
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  static_cast<std::atomic<bool>*>(flag)->store(true);
}

// Options for a server on `stream`, compiling for real (no disk cache).
cubert::cuda::options on_stream(CUstream stream) {
  cubert::cuda::options opts;
  opts.kernel_cache_dir = std::filesystem::path{};
  opts.stream = stream;
  return opts;
}

class CudaCallersStream : public ::testing::Test {
 protected:
  void SetUp() override {
    owned_.open();
    if (IsSkipped() || HasFatalFailure()) return;
    server_ = std::make_unique<cuda_server>(0, on_stream(owned_.stream));
  }
  void TearDown() override {
    server_.reset();
    owned_.close();
  }

  cubert::test::owned_stream owned_;  // The caller's stream the server serves on.
  std::unique_ptr<cuda_server> server_;
  std::atomic<bool> done_{false};  // Set by the owner's work on the stream.
};

TEST_F(CudaCallersStream, SyncWaitsForTheOwnersWork) {
  ASSERT_EQ(driver().cuLaunchHostFunc(owned_.stream, hold_then_mark, &done_), CUDA_SUCCESS);
  server_->sync().get();
  EXPECT_TRUE(done_.load()) << "sync returned before the work queued on the stream ran";
}

TEST_F(CudaCallersStream, ReadsComeAfterTheOwnersWrites) {
  std::vector<std::byte> const zeros(4096, std::byte{0});
  auto const h = server_->create(zeros);
  server_->sync().get();
  auto const address = server_->get_resource(h.binding()).resource.address();
  // The owner's write waits behind 50 ms of other work; a read on any other stream would see
  // the zeros.
  ASSERT_EQ(driver().cuLaunchHostFunc(owned_.stream, hold_then_mark, &done_), CUDA_SUCCESS);
  ASSERT_EQ(driver().cuMemsetD8Async(address, 0x5a, zeros.size(), owned_.stream), CUDA_SUCCESS);
  auto const back = std::move(server_->read({h.binding()}).get().at(0));
  ASSERT_EQ(back.size(), zeros.size());
  std::vector<std::byte> const expected(zeros.size(), std::byte{0x5a});
  EXPECT_EQ(std::memcmp(back.data(), expected.data(), expected.size()), 0);
}

TEST_F(CudaCallersStream, KernelsOfAClientOnTheActorChannelJoinTheStream) {
  server_.reset();
  cubert::client c(cubert::backend::make_channel(
      cubert::cuda::make_server(0, on_stream(owned_.stream)), cubert::channel_kind::actor));
  auto const k =
      cubert::kernel::builder("stream_test::mark")
          .cuda_source("extern \"C\" __global__ void mark(unsigned* p) { p[0] = 9; }", "mark")
          .build();
  auto const h = c.empty(4);
  c.execute(k, cubert::cube_count{1}, cubert::bindings{}.with_buffer(h.binding()));
  c.sync();  // Compiled and launched on the caller's stream.
  ASSERT_EQ(driver().cuLaunchHostFunc(owned_.stream, hold_then_mark, &done_), CUDA_SUCCESS);
  c.execute(k, cubert::cube_count{1}, cubert::bindings{}.with_buffer(h.binding()));
  c.sync();
  EXPECT_TRUE(done_.load()) << "the client's sync returned before the owner's work ran";
}

TEST_F(CudaCallersStream, TheLegacyDefaultStreamServesToo) {
  server_.reset();
  cuda_server legacy(0, on_stream(nullptr));
  std::vector<std::byte> data(3 << 20);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 7);
  auto const h = legacy.create(data);
  auto const back = std::move(legacy.read({h.binding()}).get().at(0));
  ASSERT_EQ(back.size(), data.size());
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
  legacy.sync().get();
}

TEST_F(CudaCallersStream, ThePerThreadDefaultStreamIsRefused) {
  try {
    cuda_server refused(0, on_stream(CU_STREAM_PER_THREAD));
    FAIL() << "a server on CU_STREAM_PER_THREAD was made";
  } catch (cubert::invalid_argument const& e) {
    EXPECT_NE(std::string(e.what()).find("CU_STREAM_PER_THREAD"), std::string::npos) << e.what();
  }
}

// A pool hit skips the context check, so every path of the storage that reaches the driver
// must make the context current itself: a new thread has none.
TEST_F(CudaCallersStream, AThreadWithoutAContextReservesAndFreesPages) {
  std::vector<std::byte> const data(3 << 20, std::byte{4});
  auto const h = server_->create(data);
  std::thread([&] {
    CUcontext current = nullptr;
    ASSERT_EQ(driver().cuCtxGetCurrent(&current), CUDA_SUCCESS);
    ASSERT_EQ(current, nullptr);
    auto miss = server_->empty(std::uint64_t{5} << 20);  // A new page from the driver.
    { auto hit = server_->empty(256); }
    auto hit = server_->empty(256);  // The same slot again, no driver call.
    EXPECT_EQ(miss.size(), std::uint64_t{5} << 20);
    EXPECT_EQ(hit.size(), 256U);
  }).join();
  std::thread([&] {
    cubert::cuda::detail::cuda_storage storage(owned_.context, owned_.stream, 256);
    auto const page = storage.alloc(std::uint64_t{1} << 20);
    EXPECT_EQ(storage.bytes_held(), std::uint64_t{1} << 20);
    storage.dealloc(page.id);
    storage.flush();
    EXPECT_EQ(storage.bytes_held(), 0U);
  }).join();
  auto const back = std::move(server_->read({h.binding()}).get().at(0));
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
}

TEST_F(CudaCallersStream, TheStreamOutlivesTheServer) {
  std::vector<std::byte> const data(1 << 20, std::byte{7});
  { auto const h = server_->create(data); }
  server_.reset();
  auto const& api = driver();
  ASSERT_EQ(api.cuCtxSetCurrent(owned_.context), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  ASSERT_EQ(api.cuMemAlloc(&p, 256), CUDA_SUCCESS);
  EXPECT_EQ(api.cuMemsetD8Async(p, 1, 256, owned_.stream), CUDA_SUCCESS);
  EXPECT_EQ(api.cuStreamSynchronize(owned_.stream), CUDA_SUCCESS);
  EXPECT_EQ(api.cuMemFree(p), CUDA_SUCCESS);
}

using cubert::test::stream_gate;

// The fake driver's count of frees made while a stream had work left; none on a GPU.
int busy_frees() {
  auto* const count = cubert::test::fake::busy_frees();
  return count ? count() : 0;
}

// cuMemFree waits for the whole device, so a page given back while the stream is busy is queued;
// the queue goes back to the driver at the first free, reservation or reap that finds the stream
// idle, never by a call that would wait.
TEST_F(CudaCallersStream, QueuedPagesAreFreedWhenTheStreamIsFoundIdle) {
  auto const busy_before = busy_frees();
  cubert::cuda::detail::cuda_storage storage(owned_.context, owned_.stream, 256);
  auto const mib = std::uint64_t{1} << 20;
  auto const a = storage.alloc(mib);
  auto const b = storage.alloc(2 * mib);
  stream_gate gate;
  ASSERT_EQ(driver().cuLaunchHostFunc(owned_.stream, stream_gate::hold, &gate), CUDA_SUCCESS);
  storage.dealloc(a.id);
  EXPECT_EQ(storage.pending_frees(), 1U);
  EXPECT_FALSE(storage.reap()) << "a page was freed while the stream was busy";
  auto const c = storage.alloc(4 * mib);  // Reaps first: the stream is still busy.
  EXPECT_EQ(storage.pending_frees(), 1U);
  EXPECT_EQ(storage.bytes_held(), 7 * mib);
  gate.open.store(true);
  ASSERT_EQ(driver().cuStreamSynchronize(owned_.stream), CUDA_SUCCESS);
  EXPECT_TRUE(storage.reap());
  EXPECT_EQ(storage.pending_frees(), 0U);
  EXPECT_EQ(storage.bytes_held(), 6 * mib);

  // A free that finds the stream idle takes the queue with it; so does a reservation.
  stream_gate again;
  ASSERT_EQ(driver().cuLaunchHostFunc(owned_.stream, stream_gate::hold, &again), CUDA_SUCCESS);
  storage.dealloc(b.id);
  EXPECT_EQ(storage.pending_frees(), 1U);
  again.open.store(true);
  ASSERT_EQ(driver().cuStreamSynchronize(owned_.stream), CUDA_SUCCESS);
  storage.dealloc(c.id);
  EXPECT_EQ(storage.pending_frees(), 0U);
  EXPECT_EQ(storage.bytes_held(), 0U);
  stream_gate third;
  ASSERT_EQ(driver().cuLaunchHostFunc(owned_.stream, stream_gate::hold, &third), CUDA_SUCCESS);
  auto const d = storage.alloc(mib);
  storage.dealloc(d.id);
  EXPECT_EQ(storage.pending_frees(), 1U);
  third.open.store(true);
  ASSERT_EQ(driver().cuStreamSynchronize(owned_.stream), CUDA_SUCCESS);
  auto const e = storage.alloc(mib);
  EXPECT_EQ(storage.pending_frees(), 0U);
  EXPECT_EQ(storage.bytes_held(), mib);
  storage.dealloc(e.id);
  EXPECT_EQ(busy_frees(), busy_before) << "cuMemFree was called with work left on the stream";
}

// Another library's memory (a DLPack import) is never freed here: its owner is released instead,
// on the terms of a page's free, so the producer cannot reuse the bytes under a queued kernel.
TEST_F(CudaCallersStream, AnAdoptedPagesOwnerIsReleasedOnlyOnceTheStreamIsIdle) {
  auto const& api = driver();
  CUdeviceptr theirs = 0;
  ASSERT_EQ(api.cuMemAlloc(&theirs, 1 << 20), CUDA_SUCCESS);
  int released = 0;
  {
    cubert::cuda::detail::cuda_storage storage(owned_.context, owned_.stream, 256);
    std::shared_ptr<void> owner(new int(0), [&released](void* p) {
      ++released;
      delete static_cast<int*>(p);
    });
    auto const a = storage.adopt(theirs, 1 << 20, std::move(owner));
    EXPECT_EQ(storage.get(a).address(), theirs);
    EXPECT_EQ(storage.bytes_held(), 0U) << "adopted bytes are not the storage's";
    stream_gate gate;
    ASSERT_EQ(driver().cuLaunchHostFunc(owned_.stream, stream_gate::hold, &gate), CUDA_SUCCESS);
    storage.dealloc(a.id);
    EXPECT_EQ(released, 0) << "released while the stream may still use the bytes";
    EXPECT_FALSE(storage.reap());
    gate.open.store(true);
    ASSERT_EQ(driver().cuStreamSynchronize(owned_.stream), CUDA_SUCCESS);
    EXPECT_TRUE(storage.reap());
    EXPECT_EQ(released, 1);

    // Adopted and not given back: the storage's end releases it, without freeing the bytes.
    auto const b = storage.adopt(theirs, 4096, std::shared_ptr<void>(new int(0), [&](void* p) {
                                   ++released;
                                   delete static_cast<int*>(p);
                                 }));
    (void)b;
    // Memory the driver does not know is refused, its owner released at once.
    std::vector<char> host(64);
    EXPECT_THROW((void)storage.adopt(reinterpret_cast<std::uintptr_t>(host.data()), 64,
                                     std::shared_ptr<void>(new int(0),
                                                           [&](void* p) {
                                                             ++released;
                                                             delete static_cast<int*>(p);
                                                           })),
                 cubert::invalid_argument);
    EXPECT_EQ(released, 2);
  }
  EXPECT_EQ(released, 3);
  EXPECT_EQ(api.cuMemFree(theirs), CUDA_SUCCESS) << "the adopted bytes were freed by cubert";
}

// For n = 0, 1, ...: the n-th host allocation of building a server fails, until one is built.
// Each failure must reach the caller as an exception: the copy pool's condition variable went
// on the heap under a noexcept constructor (the staging's), and its bad_alloc terminated.
void sweep_failed_server_allocations() {
  for (long n = 0; n < 100000; ++n) {
    std::unique_ptr<cubert::backend::server> server;
    bool threw = false;
    {
      cubert::test::failing_allocations const failing(n);
      try {
        server = cubert::cuda::make_server(0);
      } catch (std::bad_alloc const&) {
        threw = true;
      } catch (cubert::error const&) {
        threw = true;
      }
    }
    if (!threw) std::_Exit(server ? 0 : 2);
  }
  std::_Exit(3);
}

TEST(CudaServerConstruction, EveryFailedAllocationIsThrownNotATerminate) {
  if (cubert::cuda::device_count() == 0) GTEST_SKIP() << "needs a CUDA device (or the fake)";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(sweep_failed_server_allocations(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
