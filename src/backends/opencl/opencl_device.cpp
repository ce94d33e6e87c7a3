// SPDX-License-Identifier: Apache-2.0
#include "opencl_device.hpp"

#include "opencl_library.hpp"

#include <cubert/detail/exit_threads.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <limits>

namespace cubert::opencl::detail {
namespace {

// CL_DEVICE_WARP_SIZE_NV, from cl_nv_device_attribute_query (cl_ext.h is not needed for one
// constant).
constexpr cl_device_info device_warp_size_nv = 0x4003;

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ' || s.back() == '\n')) s.pop_back();
  auto const start = s.find_first_not_of(' ');
  return start == std::string::npos ? std::string{} : s.substr(start);
}

template <typename Getter, typename Object, typename Param>
std::string text(Getter get, Object object, Param param, char const* call) {
  std::size_t size = 0;
  check(get(object, param, 0, nullptr, &size), call);
  std::string out(size, '\0');
  if (size > 0) check(get(object, param, size, out.data(), nullptr), call);
  return trimmed(std::move(out));
}

template <typename T>
T device_value(cl_device_id d, cl_device_info param) {
  T value{};
  check(opencl().clGetDeviceInfo(d, param, sizeof value, &value, nullptr), "clGetDeviceInfo");
  return value;
}

device_record read_device(cl_platform_id platform, cl_device_id d) {
  auto const& api = opencl();
  device_record r;
  r.platform = platform;
  r.device = d;
  r.name = text(api.clGetDeviceInfo, d, CL_DEVICE_NAME, "clGetDeviceInfo");
  r.vendor = text(api.clGetDeviceInfo, d, CL_DEVICE_VENDOR, "clGetDeviceInfo");
  r.version = text(api.clGetDeviceInfo, d, CL_DEVICE_VERSION, "clGetDeviceInfo");
  r.driver_version = text(api.clGetDeviceInfo, d, CL_DRIVER_VERSION, "clGetDeviceInfo");
  r.c_version = text(api.clGetDeviceInfo, d, CL_DEVICE_OPENCL_C_VERSION, "clGetDeviceInfo");
  r.extensions = text(api.clGetDeviceInfo, d, CL_DEVICE_EXTENSIONS, "clGetDeviceInfo");
  r.platform_name = text(api.clGetPlatformInfo, platform, CL_PLATFORM_NAME, "clGetPlatformInfo");
  r.platform_version =
      text(api.clGetPlatformInfo, platform, CL_PLATFORM_VERSION, "clGetPlatformInfo");
  r.type = device_value<cl_device_type>(d, CL_DEVICE_TYPE);
  r.global_memory = device_value<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE);
  r.max_alloc = device_value<cl_ulong>(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  r.local_memory = device_value<cl_ulong>(d, CL_DEVICE_LOCAL_MEM_SIZE);
  r.max_parameter_size = device_value<std::size_t>(d, CL_DEVICE_MAX_PARAMETER_SIZE);
  r.compute_units = device_value<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS);
  r.base_address_align = device_value<cl_uint>(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8;
  r.max_work_group_size = device_value<std::size_t>(d, CL_DEVICE_MAX_WORK_GROUP_SIZE);
  auto const dims = device_value<cl_uint>(d, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS);
  std::vector<std::size_t> sizes(std::max<cl_uint>(dims, 3), 1);
  check(api.clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_ITEM_SIZES, dims * sizeof(std::size_t),
                            sizes.data(), nullptr),
        "clGetDeviceInfo");
  for (std::size_t i = 0; i < 3; ++i) r.max_work_item_sizes[i] = sizes[i];
  if (r.has_extension("cl_nv_device_attribute_query")) {
    r.warp_size = device_value<cl_uint>(d, device_warp_size_nv);
  }
  return r;
}

struct listing {
  std::vector<device_record> devices;
  std::string failure;
};

// The process generation (cubert::detail::process_generation) that started the driver, or none.
constexpr std::uint64_t not_started = ~std::uint64_t{0};
std::atomic<std::uint64_t> started_in{not_started};

listing list_devices() {
  listing out;
  auto const& state = opencl_state();
  started_in.store(cubert::detail::process_generation(), std::memory_order_relaxed);
  if (!state.loaded) {
    out.failure = state.failure;
    return out;
  }
  try {
    cl_uint count = 0;
    cl_int const r = state.clGetPlatformIDs(0, nullptr, &count);
    if (r == -1001 || count == 0) {  // CL_PLATFORM_NOT_FOUND_KHR: the loader found no ICD.
      out.failure = fmt::format("no OpenCL platform: the ICD loader {} lists none", state.file);
      return out;
    }
    check(r, "clGetPlatformIDs");
    std::vector<cl_platform_id> platforms(count);
    check(state.clGetPlatformIDs(count, platforms.data(), nullptr), "clGetPlatformIDs");
    for (auto platform : platforms) {
      cl_uint n = 0;
      cl_int const got = state.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &n);
      if (got == CL_DEVICE_NOT_FOUND || n == 0) continue;
      check(got, "clGetDeviceIDs");
      std::vector<cl_device_id> ids(n);
      check(state.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, n, ids.data(), nullptr),
            "clGetDeviceIDs");
      for (auto id : ids) {
        // A device without a compiler runs no OpenCL C, and an unavailable one nothing.
        if (!device_value<cl_bool>(id, CL_DEVICE_AVAILABLE) ||
            !device_value<cl_bool>(id, CL_DEVICE_COMPILER_AVAILABLE)) {
          continue;
        }
        out.devices.push_back(read_device(platform, id));
      }
    }
    if (out.devices.empty()) {
      out.failure = fmt::format(
          "no OpenCL device: the {} platform(s) the ICD loader lists have no available device "
          "with a compiler",
          count);
    }
  } catch (error const& e) {
    out.devices.clear();
    out.failure = fmt::format("the OpenCL platforms cannot be listed: {}", e.what());
  }
  return out;
}

listing const& the_listing() {
  static auto const& l = *new listing(list_devices());
  return l;
}

}  // namespace

bool device_record::has_extension(std::string_view extension) const {
  std::size_t pos = 0;
  while ((pos = extensions.find(extension, pos)) != std::string::npos) {
    auto const end = pos + extension.size();
    if ((pos == 0 || extensions[pos - 1] == ' ') &&
        (end == extensions.size() || extensions[end] == ' ')) {
      return true;
    }
    pos = end;
  }
  return false;
}

bool started_before_fork() noexcept {
  auto const started = started_in.load(std::memory_order_relaxed);
  return started != not_started && started != cubert::detail::process_generation();
}

std::string forked_reason() {
  return "OpenCL was started before this process was forked from its parent; a fork() child "
         "cannot use it (the driver's threads and device state stay with the parent): make "
         "OpenCL clients only in processes that did not inherit a started driver (fork before "
         "the first use, or exec a new program)";
}

std::vector<device_record> const& device_list() {
  static std::vector<device_record> const none;
  auto const& listed = the_listing().devices;
  return started_before_fork() ? none : listed;
}

std::string const& listing_failure() {
  static std::string const forked = forked_reason();
  auto const& failure = the_listing().failure;
  return started_before_fork() ? forked : failure;
}

device_record const& device_at(int ordinal) {
  auto const& list = device_list();
  if (list.empty()) throw unsupported(fmt::format("no OpenCL device: {}", listing_failure()));
  if (ordinal < 0 || static_cast<std::size_t>(ordinal) >= list.size()) {
    throw invalid_argument(
        fmt::format("OpenCL device {} does not exist: {} device(s) present", ordinal, list.size()));
  }
  return list[static_cast<std::size_t>(ordinal)];
}

device_properties make_device_properties(device_record const& d, int ordinal) {
  device_properties p;
  p.name = d.name;
  p.backend = "opencl";
  p.index = static_cast<std::uint32_t>(ordinal);
  // Slices are bound as sub-buffers, whose origin must be a multiple of the base-address
  // alignment: aligning every slice to it makes every binding of a reservation bindable.
  auto const alignment = std::max<std::uint64_t>(d.base_address_align, 64);
  // A page is one cl_mem, which cannot exceed CL_DEVICE_MAX_MEM_ALLOC_SIZE.
  p.memory = memory::device_memory_properties{d.max_alloc, alignment};
  p.memory.max_alloc_size = d.max_alloc;
  p.total_memory = d.global_memory;
  auto& hw = p.hardware;
  hw.processor = (d.type & CL_DEVICE_TYPE_GPU) != 0   ? processor_kind::gpu
                 : (d.type & CL_DEVICE_TYPE_CPU) != 0 ? processor_kind::cpu
                                                      : processor_kind::accelerator;
  hw.plane_size_min = d.warp_size;
  hw.plane_size_max = d.warp_size;
  hw.max_bindings = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(d.max_parameter_size / sizeof(cl_mem), 1024));
  hw.max_shared_memory_size = d.local_memory;
  // What NVIDIA's grids take; a CPU device takes more, but a portable program keeps below.
  hw.max_cube_count = {2147483647U, 65535U, 65535U};
  hw.max_units_per_cube = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(d.max_work_group_size, std::numeric_limits<std::uint32_t>::max()));
  auto const clamp32 = [](std::uint64_t v) {
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(v, 0xffffffffU));
  };
  hw.max_cube_dim = cube_dim{clamp32(d.max_work_item_sizes[0]), clamp32(d.max_work_item_sizes[1]),
                             clamp32(d.max_work_item_sizes[2])};
  hw.num_compute_units = d.compute_units;
  p.timing = timing_method::device;
  p.architecture = d.version;
  p.driver_version = d.driver_version;
  p.compiler = fmt::format("{} {}", d.platform_name, d.platform_version);
  return p;
}

}  // namespace cubert::opencl::detail
