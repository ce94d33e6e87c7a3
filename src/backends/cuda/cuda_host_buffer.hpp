// SPDX-License-Identifier: Apache-2.0
// Page-locked host buffers (client::alloc_host on CUDA) and the test "is this memory pinned?".
#pragma once

#include <cubert/host_buffer.hpp>

#include <cuda.h>

#include <cstddef>

namespace cubert::cuda::detail {

/// `size` bytes of page-locked host memory (cuMemHostAlloc, portable to every context),
/// registered so transfers recognise it without asking the driver. The buffer retains the
/// device's primary context until it is freed, so it stays valid after the server that made it
/// is gone; it may be freed on any thread. Size 0 gives an empty buffer.
/// @throws out_of_memory when the driver cannot pin that much; device_error otherwise.
[[nodiscard]] host_buffer make_pinned_buffer(CUdevice device, std::size_t size);

/// True when all of [p, p + n) is page-locked host memory the DMA engines can address directly:
/// inside one of our pinned buffers (a map lookup), or, when `ask_driver`, memory the driver
/// reports as page-locked host memory at both ends (pinned or registered by someone else; two
/// driver calls, and a current context). False for n == 0. Never throws.
[[nodiscard]] bool is_pinned(void const* p, std::size_t n, bool ask_driver = true) noexcept;

}  // namespace cubert::cuda::detail
