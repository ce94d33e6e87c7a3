// SPDX-License-Identifier: Apache-2.0
// Conformance of the memory API reached from the client: a persistent allocation scope (cubecl's
// `memory_persistent_allocation`), asynchronous tensor reads, and memory of other libraries
// imported without a copy.
#include "byte_helpers.hpp"
#include "conformance_backend.hpp"
#include "conformance_fixture.hpp"
#include "conformance_kernels.hpp"

#include <cubert/client.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

namespace cubert::conformance {
namespace {

using test::bytes_of;
using test::values_of;

class Memory : public conformance_fixture {
 protected:
  // Bytes the device's pools hold from storage after `f` ran, less those before.
  template <typename F>
  std::uint64_t reserved_by(F&& f) {
    auto const before = c().memory_usage().bytes_reserved;
    f();
    return c().memory_usage().bytes_reserved - before;
  }
};

// An odd size: the persistent pool allocates exactly it (every backend's alignment divides
// 4 KiB); the dynamic pools cut it from a page of their own size.
constexpr std::uint64_t odd_size = (std::uint64_t{3} << 20) + 4096;

TEST_P(Memory, APersistentScopeSendsTheThreadsReservationsToTheExactSizePool) {
  std::optional<handle> kept;
  std::uint64_t other_thread = 0;
  auto const inside = reserved_by([&] {
    c().memory_persistent_allocation([&] {
      kept.emplace(c().empty(odd_size));
      // Another thread's reservation in the meantime is not persistent.
      std::thread([&] {
        auto const before = c().memory_usage().bytes_reserved;
        auto const h = c().empty(odd_size + 4096);
        other_thread = c().memory_usage().bytes_reserved - before;
      }).join();
    });
  });
  EXPECT_NE(other_thread, odd_size + 4096) << "another thread's reservation was persistent";
  EXPECT_EQ(inside - other_thread, odd_size) << "the scope's reservation was not exact-size";
  // Given back, the slice is kept for the next reservation of its size, scope or not.
  kept.reset();
  EXPECT_EQ(reserved_by([&] { kept.emplace(c().empty(odd_size)); }), 0U);
  // The scope's value passes through; the data stays what was written.
  auto const h = c().memory_persistent_allocation([&] {
    return c().create(bytes_of(std::vector<std::uint32_t>{1, 2, 3}));
  });
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(h.binding())),
            (std::vector<std::uint32_t>{1, 2, 3}));
}

TEST_P(Memory, PersistentScopesNestAndCloseWhenTheirFunctionThrows) {
  EXPECT_THROW(c().memory_persistent_allocation([&] {
    c().memory_persistent_allocation([&] { (void)c().empty(64); });
    throw std::runtime_error("inside");
  }),
               std::runtime_error);
  // Closed: an odd size now goes to the dynamic pools.
  auto const h_size = odd_size + 8192;
  std::optional<handle> h;
  EXPECT_NE(reserved_by([&] { h.emplace(c().empty(h_size)); }), h_size);
}

TEST_P(Memory, ReadTensorAsyncGivesTheDenseBytes) {
  std::vector<float> const values{1, 2, 3, 4, 5, 6};
  auto const t = c().create_tensor(bytes_of(values), {2, 3}, sizeof(float));
  auto pending = c().read_tensor_async({{t.handle.binding(), {2, 3}, t.strides, sizeof(float)}});
  auto const got = pending.get();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(values_of<float>(got[0]), values);
}

// Host memory of another library on a device that runs on the host: transfers, fills, copies
// and kernels use the caller's bytes themselves; the owner goes once, after the last use (a
// launch still queued holds it). Other devices refuse host memory they cannot address.
TEST_P(Memory, ImportedHostMemoryIsUsedInPlaceAndReleasedAfterItsLastUse) {
  std::uint32_t const n = 1024;
  auto theirs = std::make_shared<std::vector<float>>(n, 1.0F);
  int released = 0;
  auto const address = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(theirs->data()));
  std::shared_ptr<void> owner(new int(0), [&released, keep = theirs](void* p) {
    ++released;
    delete static_cast<int*>(p);
  });
  if (c().properties().backend == "cuda") {  // Pageable host memory is not the device's.
    EXPECT_THROW((void)c().import_memory(address, n * sizeof(float), std::move(owner)),
                 invalid_argument);
    EXPECT_EQ(released, 1);
    return;
  }
  if (c().properties().backend != "cpu") {
    EXPECT_THROW((void)c().import_memory(address, n * sizeof(float), std::move(owner)),
                 unsupported);
    EXPECT_EQ(released, 1);
    return;
  }
  {
    auto const h = c().import_memory(address, n * sizeof(float), std::move(owner));
    EXPECT_EQ(c().get_resource(h.binding()).resource.host_ptr<float>(), theirs->data());
    EXPECT_EQ(values_of<float>(c().read_one(h.binding())), std::vector<float>(n, 1.0F));
    auto const two = c().create(bytes_of(std::vector<float>(n, 2.0F)));
    c().execute(kernels::add_f32(), cube_count{n / 256},
                bindings{}
                    .with_buffers({h.binding(), two.binding(), h.binding()})
                    .with_scalar(elem::u32, {n}));
    c().sync();
    EXPECT_EQ(*theirs, std::vector<float>(n, 3.0F)) << "the kernel wrote the caller's bytes";
    c().fill(h.binding(), 5.0F);
    c().sync();
    EXPECT_EQ(*theirs, std::vector<float>(n, 5.0F));
    (*theirs)[7] = 9.0F;  // Written by the other library, seen by the device.
    EXPECT_EQ(values_of<float>(c().read_one(h.binding()))[7], 9.0F);
    EXPECT_EQ(released, 0);
  }
  c().sync();
  (void)c().memory_usage();  // The manager drains the dropped slice at its next call.
  EXPECT_EQ(released, 1);
}

// Another allocation of the device, as another library's memory would be (torch's, through
// DLPack): used in place, from every stream, its owner released once after the last use.
TEST_P(Memory, ImportedDeviceMemoryIsUsedInPlaceFromEveryStream) {
  std::uint32_t const n = 256;
  int released = 0;
  auto theirs = std::make_shared<cubert::handle>(c().create(bytes_of(std::vector<float>(n, 1.0F))));
  auto const kept = theirs->binding();
  std::shared_ptr<void> owner(new int(0), [&released, theirs](void* p) {
    ++released;
    delete static_cast<int*>(p);
  });
  theirs.reset();
  bool const adopts = c().properties().backend == "cpu" || c().properties().backend == "cuda";
  auto const address = adopts ? c().get_resource(kept).resource.address() : 0x1000;
  if (!adopts) {
    EXPECT_THROW((void)c().import_memory(address, n * sizeof(float), std::move(owner)),
                 unsupported);
    EXPECT_EQ(released, 1);
    return;
  }
  {
    auto const h = c().import_memory(address, n * sizeof(float), std::move(owner));
    EXPECT_EQ(c().get_resource(h.binding()).resource.address(), address);
    EXPECT_EQ(values_of<float>(c().read_one(h.binding())), std::vector<float>(n, 1.0F));
    c().fill(h.binding(), 4.0F);
    EXPECT_EQ(values_of<float>(c().read_one(kept)), std::vector<float>(n, 4.0F))
        << "the fill wrote the other allocation's bytes";
    for (std::uint32_t s = 1; s < c().stream_count() && s < 3; ++s) {
      auto const other = c().on_stream(s);
      other.fill(h.binding(), static_cast<float>(s));
      EXPECT_EQ(values_of<float>(c().read_one(h.binding())),
                std::vector<float>(n, static_cast<float>(s)));
    }
    EXPECT_EQ(released, 0);
  }
  c().sync_device();
  (void)c().memory_usage();  // The manager drains the dropped slice at its next call.
  c().sync_device();
  c().memory_cleanup();
  EXPECT_EQ(released, 1);
  EXPECT_EQ(
      values_of<float>(c().read_one(kept))[0],
      c().stream_count() > 1 ? static_cast<float>(std::min(2U, c().stream_count() - 1)) : 4.0F);
}

// DLPack's producer contract: another library's stream waits for what was submitted here.
TEST_P(Memory, AnotherLibrarysStreamIsOrderedAfterTheWorkSubmitted) {
  auto const native = c().native_stream();
  if (c().properties().backend != "cuda") {
    EXPECT_EQ(native, 0U);
  }
  EXPECT_EQ(c().native_stream(), native) << "one calling stream, one handle";
  std::uint32_t const n = 1 << 16;
  auto const h = c().empty(n * sizeof(float));
  c().fill(h.binding(), 3.0F);
  c().order_native_stream(native);
  if (c().stream_count() > 1) {
    c().on_stream(1).fill(h.binding(), 5.0F);
    c().on_stream(1).order_native_stream(native);
  }
  EXPECT_EQ(values_of<float>(c().read_one(h.binding()))[n - 1],
            c().stream_count() > 1 ? 5.0F : 3.0F);
}

INSTANTIATE_TEST_SUITE_P(Backends, Memory, ::testing::ValuesIn(conformance_backends()),
                         [](auto const& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace cubert::conformance
