// SPDX-License-Identifier: Apache-2.0
// The CPU backend: native C++ kernels run one task per cube on a thread pool.
#pragma once

#include <cubert/bindings.hpp>
#include <cubert/channel_kind.hpp>
#include <cubert/device.hpp>
#include <cubert/error.hpp>
#include <cubert/memory/configuration.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace cubert {
class client;  // cubert/client.hpp
}  // namespace cubert
namespace cubert::backend {
class server;  // The backend contract (cubert/backend/server.hpp).
}  // namespace cubert::backend

namespace cubert::cpu {

/// Three u32 coordinates.
struct uint3 {
  std::uint32_t x = 0;
  std::uint32_t y = 0;
  std::uint32_t z = 0;
};

/// What the CPU device aligns its buffers to (`memory.alignment`): a cache line, so that
/// neighbouring slices share none. Element types aligned to more may or may not fit a buffer.
inline constexpr std::uint64_t buffer_alignment = 64;

/// A bound buffer as a kernel sees it: the binding's bytes, offsets applied.
struct buffer_view {
  std::byte* data = nullptr;
  std::uint64_t size = 0;

  /// The buffer as elements of T (trailing bytes that do not fill a T are left out).
  /// @throws invalid_argument if the bytes do not start on a T's alignment (a binding offset
  /// that is not a multiple of it, or a T aligned to more than `buffer_alignment`, which a
  /// buffer may or may not start on): reading T through such a pointer is undefined, and on
  /// some targets it traps or tears.
  template <typename T>
  [[nodiscard]] std::span<T> as() const {
    if (reinterpret_cast<std::uintptr_t>(data) % alignof(T) != 0) [[unlikely]] {
      throw_misaligned(alignof(T));
    }
    return {reinterpret_cast<T*>(data), static_cast<std::size_t>(size / sizeof(T))};
  }

 private:
  [[noreturn]] void throw_misaligned(std::size_t alignment) const;
};

/// What one cube of a CPU kernel receives. Valid only during the call.
struct kernel_context {
  uint3 cube_pos;        ///< This cube's position in the grid.
  cubert::cube_dim dim;  ///< Units per cube (loop over them yourself).
  uint3 cube_count;      ///< Cubes in the launch.
  std::span<buffer_view const> buffers;
  /// The scalars bound, per element type (indexed by `elem`; null where none were): a lookup
  /// per call costs nothing next to the body of a small cube, as a map's did not.
  std::array<scalar_binding const*, static_cast<std::size_t>(elem::boolean) + 1> scalar_table{};
  std::span<std::uint32_t const> metadata;
  execution_mode mode = execution_mode::checked;

  /// Linear index of this cube (x fastest).
  [[nodiscard]] std::uint64_t cube_index() const noexcept {
    return (std::uint64_t{cube_pos.z} * cube_count.y + cube_pos.y) * cube_count.x + cube_pos.x;
  }
  /// Buffer `i` as elements of T. @throws invalid_argument if there is no buffer i, or if it
  /// does not start on a T's alignment (see `buffer_view::as`).
  template <typename T>
  [[nodiscard]] std::span<T> buffer(std::size_t i) const {
    CUBERT_EXPECTS(i < buffers.size(), "cpu kernel: buffer index out of range");
    return buffers[i].as<T>();
  }
  /// The scalars of T's element type. @throws invalid_argument if none were bound.
  template <typename T>
  [[nodiscard]] std::span<T const> scalars() const {
    return scalars_as<T>(elem_of<T>());
  }
  /// The scalars of group `type` viewed as T (for f16/bf16 bits, use std::uint16_t).
  template <typename T>
  [[nodiscard]] std::span<T const> scalars_as(elem type) const {
    // Scalar groups are packed into 64-bit words, so wider alignments cannot be honoured.
    static_assert(alignof(T) <= alignof(std::uint64_t), "scalars are 8-byte aligned");
    auto const* group = scalar_table[static_cast<std::size_t>(type)];
    CUBERT_EXPECTS(group != nullptr, "cpu kernel: no scalar of the requested type");
    auto bytes = group->bytes();
    return {reinterpret_cast<T const*>(bytes.data()), bytes.size() / sizeof(T)};
  }
  /// Points `scalar_table` at `groups` (which must outlive the context).
  void bind_scalars(std::map<elem, scalar_binding> const& groups) noexcept {
    scalar_table.fill(nullptr);
    for (auto const& [type, group] : groups) scalar_table[static_cast<std::size_t>(type)] = &group;
  }
  /// Scalar `i` of T's element type. @throws invalid_argument if missing.
  template <typename T>
  [[nodiscard]] T scalar(std::size_t i = 0) const {
    auto s = scalars<T>();
    CUBERT_EXPECTS(i < s.size(), "cpu kernel: scalar index out of range");
    return s[i];
  }
};

/// Options of a CPU device.
struct options {
  /// Threads running cubes, the caller included; 0 = the CPUs this process may run on (its
  /// affinity mask and its cgroup CPU quota: fewer than the host's under taskset, a cpuset or
  /// `docker --cpus`).
  unsigned threads = 0;
  /// The pool layout; nullopt = the preset `[memory] pools` names (`caching` unless the
  /// configuration says otherwise: reserved bytes stay within a few percent of the peak live
  /// bytes with few storage calls, docs/performance/README.md); cubecl's `sub_slices` ladder is
  /// one option away.
  std::optional<memory::memory_configuration> memory{};
  /// Make the host look like a device this big. Unset: the memory this process may use
  /// (`total_memory`: MemTotal, or the cgroup limit when lower).
  std::optional<std::uint64_t> capacity_limit;
  /// How long the pool's workers spin for the next launch before they sleep (0 to 1 s). A launch
  /// within it starts at once; after it, waking the workers costs ~10 µs (measured in
  /// docs/performance/README.md). Each worker burns up to this much CPU after every launch, which a
  /// host whose other threads need the cores pays for: lower it there.
  std::chrono::microseconds worker_spin{250};
  /// Streams the device's work is spread over (a thread's own, then round-robin); 0 =
  /// `[streaming] max_streams`. At most 64. While one stream only is used, each command runs in
  /// its call; from the first use of a second, each stream's commands run in order on an
  /// executor thread of its own, launches taking turns on the one pool (docs/user/execution.md).
  std::uint32_t streams = 0;
};

/// A CPU server (for channels and tests). @throws invalid_argument on bad options (an
/// inconsistent memory layout); device_error when a worker thread cannot be started.
[[nodiscard]] std::unique_ptr<backend::server> make_server(options const& opts = {});

/// A client of its own over a new CPU server with `opts`, behind a channel of `channel` (include
/// <cubert/client.hpp> to use it); `make_client("cpu")` hands out the one shared, registered
/// client instead. @throws as `make_server`.
[[nodiscard]] client make_client(options const& opts = {},
                                 channel_kind channel = channel_kind::mutex);

/// The properties a CPU device with `threads` workers reports.
[[nodiscard]] device_properties make_properties(unsigned threads);

}  // namespace cubert::cpu
