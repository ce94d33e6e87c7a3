// SPDX-License-Identifier: Apache-2.0
// The CUDA backend: device memory from the driver, NVRTC-compiled kernels, CUDA-event timing.
//
// The driver (libcuda.so.1) is loaded at run time, so a program linked with cubert starts on a
// machine without a GPU: `device_count()` is then 0, `unavailable_reason()` says why, and
// `make_server` throws `unsupported`.
//
// Kernel parameters, in order: one `const __grid_constant__ CUtensorMap` per tensor-map binding
// (sm_90 and newer; a 128-byte struct aligned to 64 where <cuda.h> is not included); then one
// device pointer per buffer binding; then the scalars, group by
// group in `elem` order, each scalar its own parameter of its natural type; then, if the
// launch has metadata, one by-value parameter holding all its u32 words (declare it as a struct
// `{ unsigned int words[N]; }`). Sources are compiled with -DCUBERT_CHECKED=1 in checked mode and
// -DCUBERT_CHECKED=0 in unchecked mode.
//
// Tensors from `create_tensor(s)` / `empty_tensor(s)` have their rows (the innermost dimension)
// padded to a multiple of 16 bytes when that costs at most an eighth of a row, so they can be
// bound as tensor maps and read with 16-byte loads; use the strides they come back with.
#pragma once

#include <cubert/channel_kind.hpp>
#include <cubert/device.hpp>
#include <cubert/memory/configuration.hpp>

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

namespace cubert {
class client;  // cubert/client.hpp
}  // namespace cubert
namespace cubert::backend {
class server;  // The backend contract (cubert/backend/server.hpp).
}  // namespace cubert::backend

namespace cubert::cuda {

/// Options of a CUDA device's server.
struct options {
  /// The pool layout; nullopt = the preset `[memory] pools` names (`caching` unless the
  /// configuration says otherwise: reserved bytes stay within a few percent of the peak live
  /// bytes with few storage calls, docs/performance/README.md); cubecl's `sub_slices` ladder is
  /// one option away.
  std::optional<memory::memory_configuration> memory{};
  /// Where compiled kernels are cached on disk; nullopt = `config::get().compilation` (itself
  /// defaulting to `config::cache_root()`/kernels: $CUBERT_CACHE_DIR/kernels, else
  /// $XDG_CACHE_HOME/cubert/kernels, else ~/.cache/cubert/kernels); an empty path disables the
  /// disk cache.
  std::optional<std::filesystem::path> kernel_cache_dir;
  /// Bytes per pinned staging block, and the chunk size of large pageable transfers: small
  /// enough that the first DMA starts early (1 MiB × 32 blocks uploaded 256 MiB ~10 % faster
  /// than 4 MiB × 16 on an H100 host). An upload's copy threads take two blocks each, a
  /// download's all of their share (docs/maintainer/cuda.md, *Block size and streaming stores*).
  std::size_t staging_block_size = std::size_t{1} << 20;
  std::size_t staging_blocks = 32;  ///< Most pinned blocks held at once.
  /// Threads sharing the host-side copies of large pageable transfers, the caller included;
  /// 0 = half the CPUs this process may use (its affinity mask and cgroup CPU quota), 1 to 8;
  /// values above 64 are taken as 64.
  unsigned copy_threads = 0;
  /// Whether the copy threads write the caller's pageable memory in downloads (`read_into`,
  /// `read` beyond the read pool) of 1 MiB or more with streaming stores, which skip reading
  /// each destination line before writing it; smaller destinations stay in the cache, where
  /// plain stores are faster. Uploads write the small, reused staging blocks with plain stores,
  /// which stay in cache for the DMA. CPUs without streaming stores (x86-64 without AVX2, other
  /// architectures) use memcpy either way.
  bool streaming_downloads = true;
  /// Most bytes of idle pinned host memory the read pool keeps for `read` results (blocks go
  /// back to it when their `bytes` die; least recently returned are unpinned first). A read
  /// whose size class (at most a quarter above its size) exceeds this lands in heap memory
  /// instead; 0 disables the pool.
  std::size_t read_pool_bytes = std::size_t{1} << 30;
  /// Whether each launch waits for its kernel, so that a fault names the kernel that caused it
  /// (a debugging aid: it costs a device round trip per launch). nullopt = on when the
  /// environment sets CUBERT_CUDA_LAUNCH_BLOCKING or CUDA_LAUNCH_BLOCKING to anything but "0".
  /// Without it, a fault is reported at the next wait with every launch since the stream was
  /// last idle.
  std::optional<bool> launch_blocking;
  /// A stream (a `CUstream`) of the device's primary context for all of the server's work,
  /// instead of a non-blocking stream of its own, so that cubert's copies and kernels are
  /// ordered with what the stream's owner queues there (another library's kernels, say) without
  /// any synchronisation; nullptr is the legacy default stream (CU_STREAM_PER_THREAD is refused:
  /// it is another stream on each of cubert's copy threads). The owner keeps it alive until
  /// the server is destroyed; cubert never destroys it. `sync` then also waits for the owner's
  /// work on it. nullopt: a stream of the server's own.
  std::optional<void*> stream;
  /// Streams the device's work is spread over (a thread's own, then round-robin): stream 0 is
  /// `stream` (or the server's own), the others non-blocking streams of the server's own, made
  /// at their first command; 0 = `[streaming] max_streams`. At most 64.
  std::uint32_t streams = 0;
};

/// Number of CUDA devices; 0 when there is no driver or no GPU. Never throws.
[[nodiscard]] int device_count() noexcept;

/// Why no CUDA device can be used ("no CUDA driver: ...", a driver that cannot start or count
/// its devices, or one that reports none); empty when there are devices.
[[nodiscard]] std::string unavailable_reason();

/// The properties of device `ordinal`, read from the driver.
/// @throws unsupported without a driver; invalid_argument for an ordinal out of range.
[[nodiscard]] device_properties make_properties(int ordinal);

/// A server for device `ordinal`: its primary context, one non-blocking stream, pooled device
/// memory and the kernel caches. @throws unsupported without a driver ("no CUDA device: ..."),
/// invalid_argument for an ordinal out of range, device_error if the driver fails or the device
/// is lost.
///
/// A kernel fault (illegal address, trap, misaligned access...) loses every CUDA device for the
/// rest of the process: CUDA keeps the error in the context, neither releasing nor resetting the
/// primary context clears it, and other devices' calls return it too (driver 580). cubert
/// reports the fault once, at the next wait (`sync`, a read, or `flush` with launch blocking),
/// as a `device_error` naming the driver error and the launches it may have come from; after
/// that every call on any server of any device, and every new server, throws `device_error`
/// with that report (naming the faulting device) at once.
[[nodiscard]] std::unique_ptr<backend::server> make_server(int ordinal, options const& opts = {});

/// A client of its own over a new server of device `ordinal` with `opts`, behind a channel of
/// `channel` (include <cubert/client.hpp> to use it). Unlike `make_client("cuda:N")`, which
/// hands out the one shared, registered client of the device, each call makes another server.
/// @throws as `make_server`.
[[nodiscard]] client make_client(int ordinal, options const& opts = {},
                                 channel_kind channel = channel_kind::mutex);

}  // namespace cubert::cuda
