// SPDX-License-Identifier: Apache-2.0
// The copy threads' memcpy with streaming stores, for the staged downloads of both GPU backends.
#pragma once

#include <cstddef>

namespace cubert::host {

/// True when this CPU has the streaming (non-temporal) stores `streaming_copy` uses (x86-64
/// with AVX2). Elsewhere `streaming_copy` is `std::memcpy`.
[[nodiscard]] bool streaming_copy_supported() noexcept;

/// Copies `n` bytes like `std::memcpy` (the ranges must not overlap), writing `dst` with
/// non-temporal stores and fencing them before it returns, so that a DMA enqueued afterwards
/// by this thread sees every byte. For large destinations that this core will not read soon
/// (a download's pageable target): streaming stores skip reading each destination line before
/// writing it, a third of a plain copy's memory traffic.
void streaming_copy(void* dst, void const* src, std::size_t n) noexcept;

}  // namespace cubert::host
