// SPDX-License-Identifier: Apache-2.0
// A kernel's CUDA native call (a vendor library's entry, as matmul's cuBLAS candidate): run in a
// launch's place on the server's stream with the buffers' addresses, its failure the next sync's.
// Runs on a device and on the fake driver (ctest `cuda_native_call_fake_driver`).
#include "cuda_library.hpp"
#include "cuda_server_fixture.hpp"

#include <cubert/error.hpp>
#include <cubert/kernel.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace {

using cubert::cuda::detail::driver;

class CudaNativeCall : public cubert::test::cuda_server_fixture {};

TEST_F(CudaNativeCall, RunsInOrderOnTheServersStreamWithTheBuffersAddresses) {
  auto const a = server_->empty(64);
  std::vector<std::uint32_t> const ones(16, 1);
  auto const b = server_->create(std::as_bytes(std::span{ones}));
  auto const b_view = cubert::handle(b).offset_start(16);
  std::vector<std::uint64_t> seen;
  void* seen_stream = nullptr;
  auto const k =
      cubert::kernel::builder("native_fill")
          .cuda_native([&](cubert::native_launch const& l) {
            seen.assign(l.buffers.begin(), l.buffers.end());
            seen_stream = l.stream;
            auto const value = l.args->scalars.at(cubert::elem::u32).data[0];
            // Queued on the server's stream: the read below is ordered after it.
            ASSERT_EQ(driver().cuMemsetD32Async(l.buffers[0], static_cast<unsigned>(value), 16,
                                                static_cast<CUstream>(l.stream)),
                      CUDA_SUCCESS);
          })
          .build();
  server_->execute(k, cubert::cube_count{1},
                   std::move(cubert::bindings{}
                                 .with_buffers({a.binding(), b_view.binding()})
                                 .with_scalar(std::uint32_t{0xabcd1234})),
                   cubert::execution_mode::checked);
  ASSERT_EQ(seen.size(), 2U);
  EXPECT_EQ(seen[0], server_->get_resource(a.binding()).resource.address());
  EXPECT_EQ(seen[1], server_->get_resource(b.binding()).resource.address() + 16);
  EXPECT_NE(seen_stream, nullptr);
  auto const got = read(a.binding());
  std::vector<std::uint32_t> words(16);
  std::memcpy(words.data(), got.data(), 64);
  EXPECT_EQ(words, std::vector<std::uint32_t>(16, 0xabcd1234));
}

TEST_F(CudaNativeCall, AFailingCallFailsTheNextSyncAndTheServerGoesOn) {
  auto const k = cubert::kernel::builder("native_throws")
                     .cuda_native([](cubert::native_launch const&) {
                       throw cubert::launch_error("the library refused");
                     })
                     .build();
  server_->execute(k, cubert::cube_count{1}, cubert::bindings{},
                   cubert::execution_mode::checked);  // Fire-and-forget: nothing thrown here.
  try {
    server_->sync().get();
    FAIL() << "the failed native call was not reported";
  } catch (cubert::launch_error const& e) {
    EXPECT_NE(std::string(e.what()).find("native call 'native_throws' failed: the library refused"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(server_->sync().get());  // Reported once; the server keeps working.
  std::vector<std::uint32_t> const seven{7};
  auto const h = server_->create(std::as_bytes(std::span{seven}));
  EXPECT_EQ(read(h.binding()).size(), 4U);
}

TEST(KernelBuilder, ANativeCallIsAPayloadAndNeedsACallable) {
  EXPECT_THROW((void)cubert::kernel::builder("empty").cuda_native({}), cubert::invalid_argument);
  auto const k = cubert::kernel::builder("native_only")
                     .cuda_native([](cubert::native_launch const&) {})
                     .build();
  EXPECT_NE(k.cuda_native(), nullptr);
  EXPECT_EQ(k.cuda_source(), nullptr);
  auto const other = cubert::kernel::builder("native_only")
                         .info("another variant")
                         .cuda_native([](cubert::native_launch const&) {})
                         .build();
  EXPECT_NE(k.id(), other.id());
}

}  // namespace
