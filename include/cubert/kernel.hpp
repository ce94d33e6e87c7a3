// SPDX-License-Identifier: Apache-2.0
// Kernel definitions: an immutable, type-erased description with one payload per backend and a
// stable id that names the compiled code in caches.
#pragma once

#include <cubert/bindings.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cubert {

namespace cpu {
struct kernel_context;
}  // namespace cpu

/// A native CPU kernel: called once per cube; it loops over the units of its cube itself.
using cpu_kernel_fn = std::function<void(cpu::kernel_context const&)>;

/// What a native call receives when the device's server runs it in a launch's place: the
/// device's own stream, the buffers' device addresses and the launch's bindings (for the
/// sizes). Valid only during the call.
struct native_launch {
  void* stream = nullptr;   ///< CUDA: the `CUstream` the server's work goes to.
  void* context = nullptr;  ///< CUDA: the `CUcontext`, current on the calling thread.
  std::span<std::uint64_t const> buffers;  ///< CUDA: a `CUdeviceptr` per buffer, offsets applied.
  bindings const* args = nullptr;          ///< The launch's bindings (scalars).
};

/// A call into a vendor library (cuBLAS, say) that a kernel runs instead of compiled code, in
/// the order of the device's work. It must queue its work on `stream` and return without
/// waiting for it; what it throws fails the launch, reported by the next sync, as a kernel's
/// fault would be.
using native_call_fn = std::function<void(native_launch const&)>;

/// Stable 64-bit identity of a kernel's code (XXH3 over name, info, cube_dim, shared memory and
/// every source and option), optionally qualified by the execution mode it is compiled for.
class kernel_id {
 public:
  constexpr kernel_id() noexcept = default;
  constexpr explicit kernel_id(std::uint64_t hash) noexcept : hash_(hash) {}

  /// The same id for the variant compiled in `mode`.
  [[nodiscard]] constexpr kernel_id with_mode(execution_mode mode) const noexcept {
    kernel_id out = *this;
    out.mode_ = mode;
    return out;
  }
  [[nodiscard]] constexpr std::uint64_t hash() const noexcept { return hash_; }
  [[nodiscard]] constexpr std::optional<execution_mode> mode() const noexcept { return mode_; }
  /// "0123456789abcdef" or "0123456789abcdef-checked": stable across processes and builds.
  [[nodiscard]] std::string to_string() const;

  friend constexpr bool operator==(kernel_id const&, kernel_id const&) = default;

 private:
  std::uint64_t hash_ = 0;
  std::optional<execution_mode> mode_;
};

/// CUDA C++ source compiled with NVRTC.
struct cuda_source_payload {
  std::string source;
  std::string entry_point;
  std::vector<std::string> options;
};
/// Ready PTX text.
struct ptx_payload {
  std::string text;
  std::string entry_point;
};
/// A ready cubin image.
struct cubin_payload {
  std::vector<std::byte> bytes;
  std::string entry_point;
};
/// OpenCL C source.
struct opencl_source_payload {
  std::string source;
  std::string entry_point;
  std::vector<std::string> options;
};

/// A source in the portable dialect (cubert/portable.hpp), compiled as CUDA C++ and as OpenCL C.
struct portable_source_payload {
  std::string source;
  std::string entry_point;
  std::vector<std::string> options;  ///< Given to both compilers (NVRTC, clBuildProgram).
};

/// An immutable kernel definition. Cheap to copy (shares one definition); safe to share across
/// threads. A backend runs the payload it understands and rejects a kernel without one.
class kernel {
 public:
  class builder;

  /// An empty kernel (no definition); `valid()` is false and launching it is an error.
  kernel() noexcept = default;

  [[nodiscard]] bool valid() const noexcept { return def_ != nullptr; }
  [[nodiscard]] std::string const& name() const noexcept;
  [[nodiscard]] std::string const& info() const noexcept;
  [[nodiscard]] cubert::cube_dim cube_dim() const noexcept;
  /// Cubes per thread-block cluster; 1 × 1 × 1 (the default) launches no clusters.
  [[nodiscard]] cubert::cube_dim cluster_dim() const noexcept;
  /// Whether every cube of a launch runs at once (`builder::cooperative`).
  [[nodiscard]] bool cooperative() const noexcept;
  [[nodiscard]] std::uint64_t shared_memory() const noexcept;
  [[nodiscard]] kernel_id id() const noexcept;

  /// The native CPU callable, or nullptr.
  [[nodiscard]] cpu_kernel_fn const* cpu() const noexcept;
  /// The CUDA source payload, or nullptr.
  [[nodiscard]] cuda_source_payload const* cuda_source() const noexcept;
  /// The PTX payload, or nullptr.
  [[nodiscard]] ptx_payload const* ptx() const noexcept;
  /// The cubin payload, or nullptr.
  [[nodiscard]] cubin_payload const* cubin() const noexcept;
  /// The OpenCL source payload, or nullptr.
  [[nodiscard]] opencl_source_payload const* opencl_source() const noexcept;
  /// The CUDA native call, or nullptr.
  [[nodiscard]] native_call_fn const* cuda_native() const noexcept;
  /// The portable source the kernel was given, or nullptr (`cuda_source()` and
  /// `opencl_source()` hold what was made of it).
  [[nodiscard]] portable_source_payload const* portable_source() const noexcept;

 private:
  struct definition;
  explicit kernel(std::shared_ptr<definition const> def) noexcept : def_(std::move(def)) {}
  std::shared_ptr<definition const> def_;
};

/// Builds a kernel: `kernel::builder{"add"}.cube_dim(256).cpu(fn).build()`. A builder builds
/// once: any call after `build()` throws invalid_argument.
class kernel::builder {
 public:
  /// @throws invalid_argument on an empty name.
  explicit builder(std::string name);
  ~builder();
  builder(builder&&) noexcept;
  builder& operator=(builder&&) noexcept;

  /// Units per cube. @throws invalid_argument if any axis is 0.
  builder& cube_dim(std::uint32_t x, std::uint32_t y = 1, std::uint32_t z = 1);
  /// Cubes per thread-block cluster (CUDA, compute capability 9.0+): the cubes of one cluster
  /// run at the same time on one GPU processing cluster and may read and write each other's
  /// shared memory. Every launch's cube count must be a multiple of it on each axis. A device
  /// without clusters (`hardware.max_cluster_size` 1) refuses the kernel (`unsupported`); a
  /// cluster above `max_cluster_size` (the portable size) is put to the driver, and one the
  /// part cannot place fails the launch: a `device_error` at the next sync or read.
  /// @throws invalid_argument if any axis is 0.
  builder& cluster_dim(std::uint32_t x, std::uint32_t y = 1, std::uint32_t z = 1);
  /// Launches cooperatively (CUDA, `hardware.cooperative_launch`): every cube of a launch is
  /// resident at once, so cubes may wait for each other across the whole grid (a grid-wide
  /// barrier). A cube count the device cannot hold at once is refused (`invalid_argument`,
  /// naming how many it holds); a device without cooperative launches refuses the kernel
  /// (`unsupported`).
  builder& cooperative();
  /// Bytes of shared memory per cube.
  builder& shared_memory(std::uint64_t bytes);
  /// Anything that changes the generated code (type names, tile sizes, flags): part of the id.
  builder& info(std::string info);
  /// The native CPU body. A callable cannot be hashed: name + info must tell variants apart.
  /// @throws invalid_argument on an empty callable.
  builder& cpu(cpu_kernel_fn fn);
  builder& cuda_source(std::string source, std::string entry_point,
                       std::vector<std::string> options = {});
  /// On CUDA devices, a call into a library instead of compiled code (see `native_call_fn`);
  /// it takes the place of any other CUDA payload. Its cube dims and count are not used. A
  /// callable cannot be hashed: name + info must tell variants apart. Inside a capture, a
  /// graph holding one replays its steps one by one. @throws invalid_argument when empty.
  builder& cuda_native(native_call_fn fn);
  builder& ptx(std::string text, std::string entry_point);
  builder& cubin(std::vector<std::byte> bytes, std::string entry_point);
  builder& opencl_source(std::string source, std::string entry_point,
                         std::vector<std::string> options = {});
  /// One source for the CUDA and the OpenCL backends, in the dialect of cubert/portable.hpp.
  /// `build()` makes it the kernel's CUDA source unless the kernel has a CUDA payload of its own
  /// (source, PTX or cubin), and its OpenCL source unless it has one of its own, whatever the
  /// order of the calls.
  builder& portable_source(std::string source, std::string entry_point,
                           std::vector<std::string> options = {});
  /// Freezes the definition and computes its id. @throws invalid_argument without any payload.
  [[nodiscard]] kernel build();

 private:
  std::unique_ptr<definition> def_;
};

}  // namespace cubert

template <>
struct std::hash<cubert::kernel_id> {
  std::size_t operator()(cubert::kernel_id const& id) const noexcept {
    auto const m = id.mode() ? static_cast<std::uint64_t>(*id.mode()) + 1 : 0;
    return static_cast<std::size_t>(id.hash() ^ (m * 0x9e3779b97f4a7c15ULL));
  }
};
