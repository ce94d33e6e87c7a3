// SPDX-License-Identifier: Apache-2.0
// What a device is and what it can do: listed by cubert::devices(), reported by a client.
#pragma once

#include <cubert/bindings.hpp>
#include <cubert/memory/configuration.hpp>
#include <cubert/profiling.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cubert {

/// What kind of processor runs a device's kernels: what a kernel library picks its variants by
/// (a CPU runs an OpenCL work-group as a loop, a GPU as warps).
enum class processor_kind { cpu, gpu, accelerator };

/// "cpu", "gpu", "accelerator".
[[nodiscard]] std::string_view to_string(processor_kind k) noexcept;

/// Launch limits and compute resources of a device (cubecl HardwareProperties).
struct hardware_properties {
  processor_kind processor = processor_kind::cpu;
  std::uint32_t plane_size_min = 1;  ///< Smallest warp/subgroup width.
  std::uint32_t plane_size_max = 1;  ///< Largest warp/subgroup width.
  std::uint32_t max_bindings = 0;    ///< Buffers one launch may bind.
  std::uint64_t max_shared_memory_size = 0;
  std::array<std::uint32_t, 3> max_cube_count{0, 0, 0};
  std::uint32_t max_units_per_cube = 0;
  cubert::cube_dim max_cube_dim{};
  std::uint32_t num_compute_units = 0;  ///< SMs on CUDA, worker threads on the CPU.
  std::optional<std::uint32_t> num_tensor_cores;
  std::optional<std::uint32_t> min_tensor_cores_dim;
  /// Whether launches may bind tensor maps (`bindings::tensor_maps`): CUDA on sm_90 and newer.
  bool tensor_maps = false;
  /// Most cubes one thread-block cluster may hold (`kernel::builder::cluster_dim`) on every
  /// device of this kind: 8 on CUDA sm_90 and newer (the portable size; larger clusters are put
  /// to the driver, which knows the part), 1 (no clusters) elsewhere.
  std::uint32_t max_cluster_size = 1;
  /// Whether kernels may launch cooperatively (`kernel::builder::cooperative`): CUDA devices
  /// that report it, with a driver that has cuLaunchKernelEx.
  bool cooperative_launch = false;
};

/// Everything a client can tell about its device.
struct device_properties {
  std::string name;         ///< "NVIDIA H200", "AMD EPYC 9654 96-Core Processor (16 threads)".
  std::string backend;      ///< "cpu", "cuda", "opencl".
  std::uint32_t index = 0;  ///< Ordinal within the backend.
  memory::device_memory_properties memory{};
  std::uint64_t total_memory = 0;  ///< Bytes; 0 when unknown.
  hardware_properties hardware{};
  timing_method timing = timing_method::system;
  std::string architecture;    ///< "sm_90", "x86_64".
  std::string driver_version;  ///< The CUDA version the driver supports ("13.0"), or the cubert
                               ///< version for the CPU.
  /// What compiles its kernels at run time ("NVRTC 13.0"); empty where they come compiled with
  /// the program (CPU), or where NVRTC cannot be loaded (CUDA C++ sources are then refused with
  /// `unsupported`; PTX and cubin still run).
  std::string compiler;

  /// "backend|name|architecture|compute units|driver", then "|compiler" when there is one: the
  /// device part of autotune cache keys (new code from a new compiler is tuned again).
  [[nodiscard]] std::string fingerprint() const;
};

/// One entry of cubert::devices().
struct device_info {
  std::string id;       ///< What make_client takes: "cpu", "cuda:0".
  std::string name;     ///< Human-readable device name.
  std::string backend;  ///< "cpu", "cuda", "opencl".
  /// Read from the device without opening it (no context, no client): listing devices works
  /// while one of them is held exclusively by another process.
  device_properties properties;
};

/// One backend of cubert::backends(): whether this build has it and what it found.
struct backend_info {
  std::string name;      ///< "cpu", "cuda", "opencl".
  bool built = false;    ///< Compiled into this build of cubert.
  int device_count = 0;  ///< Devices it can use in this process.
  std::string note;      ///< Why it has no device, when it has none; empty otherwise.
};

}  // namespace cubert
