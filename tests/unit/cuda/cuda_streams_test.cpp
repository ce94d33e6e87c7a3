// SPDX-License-Identifier: Apache-2.0
// Several streams of one CUDA server: work on a stream waits, on the device, for the work of
// other streams it depends on (a binding's last writer, a freed slice's last users), never on
// the host. A gate (a host function the test holds) keeps one stream busy, so "behind" is
// certain. Runs on a device and on the fake driver (ctest `cuda_streams_fake_driver`), whose
// streams run on their own threads; skipped where neither is present.
#include "cuda_library.hpp"
#include "cuda_server_fixture.hpp"
#include "fake_driver_hooks.hpp"
#include "stream_gate.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using cubert::backend::stream_request;
using cubert::cuda::detail::cuda_server;
using cubert::cuda::detail::driver;
using cubert::test::stream_gate;

constexpr std::size_t bytes = 1 << 16;

class CudaStreams : public cubert::test::cuda_server_fixture {
 protected:
  [[nodiscard]] cubert::cuda::options server_options() const override {
    auto opts = cuda_server_fixture::server_options();
    opts.streams = 4;
    return opts;
  }
  void TearDown() override {
    gate_.open.store(true);  // A failed test must not leave a stream held.
    if (server_) server_->sync_device().get();
  }
  void on(std::uint32_t s) { server_->select_stream(stream_request{s, 0}); }
  // Holds the calling stream at a host function until `gate_` opens.
  void hold() {
    auto const k = cubert::kernel::builder("streams_test::gate")
                       .cuda_native([this](cubert::native_launch const& l) {
                         ASSERT_EQ(driver().cuLaunchHostFunc(static_cast<CUstream>(l.stream),
                                                             stream_gate::hold, &gate_),
                                   CUDA_SUCCESS);
                       })
                       .build();
    server_->execute(k, cubert::cube_count{1}, cubert::bindings{}, cubert::execution_mode::checked);
  }
  // Opens the gate a little later, from another thread, while the caller waits.
  std::jthread open_later() {
    return std::jthread([this] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      gate_.open.store(true);
    });
  }
  std::vector<std::byte> read_back(cubert::binding const& b) {
    auto const got = read(b);
    return {got.data(), got.data() + got.size()};
  }
  void fill(cubert::binding const& b, std::uint32_t v) {
    server_->fill(b, std::as_bytes(std::span{&v, 1}));
  }
  static std::vector<std::byte> words(std::uint32_t v) {
    std::vector<std::byte> out(bytes);
    for (std::size_t i = 0; i < bytes; i += 4) std::memcpy(out.data() + i, &v, 4);
    return out;
  }

  stream_gate gate_;
};

TEST_F(CudaStreams, TheServerHasTheStreamsAskedFor) {
  EXPECT_EQ(server_->stream_count(), 4U);
  cubert::cuda::options opts;
  opts.streams = 65;
  EXPECT_THROW(cuda_server(0, opts), cubert::invalid_argument);
}

TEST_F(CudaStreams, ACopyOnAnotherStreamSeesTheFillItDependsOn) {
  auto const x = server_->empty(bytes);
  auto const y = server_->empty(bytes);
  on(1);
  hold();
  fill(x.binding(), 0x11111111);  // Behind the gate.
  on(2);
  server_->copy(x.binding(), y.binding());  // Waits for stream 1 on the device.
  EXPECT_GE(server_->stream_waits(), 1U);
  auto const opener = open_later();
  EXPECT_EQ(read_back(y.binding()), words(0x11111111));
}

TEST_F(CudaStreams, ASliceFreedOnOneStreamIsReusedOnAnotherOnlyBehindItsLastUse) {
  auto* const count_calls = cubert::test::fake::count_calls();
  auto* const calls = cubert::test::fake::calls();
  on(1);
  auto x = std::make_optional(server_->empty(bytes));
  auto const address = server_->get_resource(x->binding()).resource.address();
  hold();
  fill(x->binding(), 0xaaaaaaaa);  // Stream 1's last use, behind the gate.
  x.reset();                       // Dropped while stream 1 still has it queued.
  on(2);
  if (count_calls) count_calls(true);
  auto const y = server_->empty(bytes);  // The same slice, handed out again.
  ASSERT_EQ(server_->get_resource(y.binding()).resource.address(), address);
  fill(y.binding(), 0x55555555);  // Must land after stream 1's fill.
  if (count_calls) {
    // Neither the free nor the reservation waited on the host.
    EXPECT_EQ(calls("cuStreamSynchronize"), 0);
    EXPECT_EQ(calls("cuEventSynchronize"), 0);
    EXPECT_EQ(calls("cuCtxSynchronize"), 0);
    count_calls(false);
  }
  auto const opener = open_later();
  EXPECT_EQ(read_back(y.binding()), words(0x55555555));
}

TEST_F(CudaStreams, AStreamMadeLaterStartsBehindWorkNoUseWasTrackedFor) {
  EXPECT_EQ(server_->stream_waits(), 0U);
  auto const x = server_->empty(bytes);
  hold();  // Stream 0, the only one so far: no use is tracked.
  fill(x.binding(), 0x22222222);
  on(3);  // Made now.
  auto const opener = open_later();
  EXPECT_EQ(read_back(x.binding()), words(0x22222222));
}

TEST_F(CudaStreams, ReadersOnSeveralStreamsDoNotWaitForEachOther) {
  for (std::uint32_t s = 3; s > 0; --s) {  // Made first: uses are tracked from here on.
    on(s);
    server_->sync().get();
  }
  on(0);
  auto const x = server_->create(words(7));
  auto const y = server_->empty(bytes);
  auto const z = server_->empty(bytes);
  on(1);
  server_->copy(x.binding(), y.binding());  // A read of x on stream 1: waits for stream 0.
  auto const after_first = server_->stream_waits();
  on(2);
  server_->copy(x.binding(), z.binding());  // Another read: waits for stream 0, not stream 1.
  EXPECT_EQ(server_->stream_waits(), after_first + 1);
  on(3);
  // A write: waits for the writer and both readers.
  server_->fill(x.binding(), std::as_bytes(std::span{"abcd", 4}));
  EXPECT_EQ(server_->stream_waits(), after_first + 1 + 3);
  EXPECT_EQ(read_back(y.binding()), words(7));
  on(2);
  EXPECT_EQ(read_back(z.binding()), words(7));
}

TEST_F(CudaStreams, SyncWaitsForTheCallingStreamAndSyncDeviceForAll) {
  auto const x = server_->empty(bytes);
  on(2);
  server_->sync().get();  // Made before stream 1 is held, so not behind it.
  on(1);
  hold();
  fill(x.binding(), 1);
  on(2);
  server_->sync().get();  // Stream 2 has nothing to do: it does not wait for stream 1.
  EXPECT_FALSE(gate_.open.load());
  auto const opener = open_later();
  server_->sync_device().get();
  EXPECT_TRUE(gate_.open.load());
  EXPECT_TRUE(gate_.reached.load());
}

TEST_F(CudaStreams, UploadsOnEachStreamGoThroughTheirOwnStagingRing) {
  // Large pageable uploads (the copy threads' path) and small packed ones, interleaved over
  // streams, each read back on a third stream.
  std::vector<cubert::handle> handles;
  std::vector<std::vector<std::byte>> data;
  for (std::uint32_t i = 0; i < 8; ++i) {
    on(i % 4);
    std::size_t const n = (i % 2 == 0) ? (std::size_t{3} << 20) + 4 * i : 256 + 4 * i;
    data.emplace_back(n);
    for (std::size_t j = 0; j < n; ++j) data.back()[j] = static_cast<std::byte>(j * 31 + i);
    handles.push_back(server_->create(data.back()));
  }
  for (std::uint32_t i = 0; i < 8; ++i) {
    on((i + 2) % 4);
    EXPECT_EQ(read_back(handles[i].binding()), data[i]) << "upload " << i;
  }
}

TEST_F(CudaStreams, AProfileMeasuresTheCallingStream) {
  on(2);
  auto const token = server_->start_profile();
  auto const x = server_->empty(bytes);
  fill(x.binding(), 3);
  auto const d = server_->end_profile(token);
  EXPECT_GE(d.resolve().count(), 0);
}

}  // namespace
