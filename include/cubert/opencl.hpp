// SPDX-License-Identifier: Apache-2.0
// The OpenCL backend: buffers on any OpenCL 1.2 device (a GPU, or a CPU through PoCL), OpenCL C
// built at run time and cached on disk, timing with profiling markers.
//
// The ICD loader (libOpenCL.so.1) is loaded at run time, so a program linked with cubert starts
// on a machine without OpenCL: `device_count()` is then 0, `unavailable_reason()` says why, and
// `make_server` throws `unsupported`. Devices are numbered across platforms in the order the
// loader lists them; only available devices with a compiler are listed.
//
// Kernel parameters, in order: one `__global T*` per buffer binding, pointing at the binding's
// first byte; then the scalars, group by group in `elem` order, each its own parameter of its
// natural type (f16 and bf16 as `ushort` bit patterns, bool as `uchar`); then, if the launch has
// metadata, one by-value parameter holding all its u32 words (a `struct { uint words[N]; }`);
// then, if the kernel has dynamic shared memory, one `__local` pointer to that many bytes. The
// kernel's cube_dim is the work-group size, cube_count × cube_dim the global size. Sources are
// built with -DCUBERT_CHECKED=1 in checked mode and -DCUBERT_CHECKED=0 in unchecked mode, after
// the payload's own options.
//
// A binding is bound as a sub-buffer of its page, whose start OpenCL requires to be a multiple
// of the device's base-address alignment: every reservation is (that is the device's
// `memory.alignment`), but a binding narrowed by hand with `offset_start` must keep to it.
#pragma once

#include <cubert/channel_kind.hpp>
#include <cubert/device.hpp>
#include <cubert/memory/configuration.hpp>

#include <cstddef>
#include <cstdint>
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

namespace cubert::opencl {

/// Options of an OpenCL device's server.
struct options {
  /// The pool layout; nullopt = the preset `[memory] pools` names (`caching` unless the
  /// configuration says otherwise, as on CUDA).
  std::optional<memory::memory_configuration> memory{};
  /// Where built programs are cached on disk; nullopt = `config::get().compilation` (as for
  /// CUDA: $CUBERT_CACHE_DIR/kernels, else $XDG_CACHE_HOME/cubert/kernels, else
  /// ~/.cache/cubert/kernels); an empty path disables the disk cache. Entries are named
  /// "opencl-<key>.bin", the key covering the source, the options, the device, its driver and
  /// the platform's version. Sources with `#include` are built every time (the key cannot see
  /// the files they include).
  std::optional<std::filesystem::path> kernel_cache_dir;
  /// In-order command queues the device's work is spread over (a thread's own, then
  /// round-robin); 0 = `[streaming] max_streams`. At most 64.
  std::uint32_t streams = 0;
  /// Whether uploads and downloads of 1 MiB or more of pageable memory go through pinned
  /// staging blocks (`CL_MEM_ALLOC_HOST_PTR`, mapped), their host-side copies shared by
  /// `copy_threads`, and `alloc_host` returns pinned memory that transfers move by one DMA.
  /// nullopt = on for every device but a CPU one (PoCL), whose buffers are host memory already.
  std::optional<bool> pinned_staging;
  /// Bytes per staging block, the largest chunk of a staged transfer. 1 MiB: a transfer's first
  /// DMA starts sooner and each thread's blocks stay in its core's cache (as on CUDA).
  std::size_t staging_block_size = std::size_t{1} << 20;
  std::size_t staging_blocks = 32;  ///< Most staging blocks pinned at once.
  /// Whether staged downloads copy out of the blocks with streaming (non-temporal) stores,
  /// which skip reading each line of the caller's large destination before writing it. CPUs
  /// without them (x86-64 without AVX2, other architectures) use memcpy either way.
  bool streaming_downloads = true;
  /// Threads sharing the host-side copies of a staged transfer, the caller included; 0 = half
  /// the CPUs this process may use, 1 to 8 (as on CUDA); values above 64 are taken as 64.
  unsigned copy_threads = 0;
};

/// Number of OpenCL devices; 0 without an ICD loader, a platform or a usable device. Never
/// throws.
[[nodiscard]] int device_count() noexcept;
/// Why no OpenCL device can be used; empty when there are devices.
[[nodiscard]] std::string unavailable_reason();
/// The properties of device `ordinal`, read from the platform.
/// @throws unsupported without a device; invalid_argument for an ordinal out of range.
[[nodiscard]] device_properties make_properties(int ordinal);
/// A server for device `ordinal`: its own context and an in-order command queue per stream with
/// profiling, pooled buffers and the program caches. @throws unsupported without a device,
/// invalid_argument for an ordinal out of range, device_error if the platform refuses the
/// context or the queue.
[[nodiscard]] std::unique_ptr<backend::server> make_server(int ordinal, options const& opts = {});

/// A client of its own over a new server of device `ordinal` with `opts`, behind a channel of
/// `channel` (include <cubert/client.hpp> to use it); `make_client("opencl:N")` hands out the
/// one shared, registered client of the device instead. @throws as `make_server`.
[[nodiscard]] client make_client(int ordinal, options const& opts = {},
                                 channel_kind channel = channel_kind::mutex);

}  // namespace cubert::opencl
