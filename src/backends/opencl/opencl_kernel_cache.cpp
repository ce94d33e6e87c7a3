// SPDX-License-Identifier: Apache-2.0
#include "opencl_kernel_cache.hpp"

#include "opencl_library.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <optional>
#include <string_view>

namespace cubert::opencl::detail {
namespace {

void release_kernel(loaded_kernel& k) noexcept {
  opencl_state().clReleaseKernel(k.kernel);
}

// What a kernel object depends on: the name (for messages), the source, the options (with the
// mode) and the entry point.
cubert::detail::code_key code_of(kernel const& k, opencl_source_payload const& payload,
                                 std::string const& options) {
  return cubert::detail::code_key_builder{}
      .add(k.name())
      .add(payload.source)
      .add(options)
      .add(payload.entry_point)
      .finish();
}

// What a program depends on: its source and build options.
cubert::detail::code_key program_key(std::string_view source, std::string_view options) {
  return cubert::detail::code_key_builder{}.add(source).add(options).finish();
}

}  // namespace

opencl_kernel_cache::ahead_store::~ahead_store() {
  auto const& api = opencl_state();
  for (auto& [key, built] : programs) api.clReleaseProgram(built.program);
}

void opencl_kernel_cache::build_ahead(kernel const& k, execution_mode mode) const {
  auto const* payload = k.opencl_source();
  if (payload == nullptr) return;
  auto const options = opencl_compiler::build_options(*payload, mode);
  auto const key = program_key(payload->source, options);
  {
    std::lock_guard lock(ahead_->mutex);
    if (ahead_->held.contains(key) || ahead_->programs.contains(key)) return;
  }
  auto const built = compiler_.build(k, *payload, options);
  std::lock_guard lock(ahead_->mutex);
  bool kept = false;
  if (!ahead_->held.contains(key)) {
    try {
      kept = ahead_->programs.try_emplace(key, built).second;
    } catch (...) {
      opencl_state().clReleaseProgram(built.program);
      throw;
    }
  }
  if (!kept) opencl_state().clReleaseProgram(built.program);  // Another thread was first.
}

std::size_t opencl_kernel_cache::waiting_ahead() const {
  std::lock_guard lock(ahead_->mutex);
  return ahead_->programs.size();
}

opencl_kernel_cache::opencl_kernel_cache(cl_context context, device_record const& device,
                                         cubert::detail::kernel_disk_cache disk)
    : compiler_(context, device, std::move(disk)), device_(device), kernels_(&release_kernel) {}

opencl_kernel_cache::program_set::~program_set() {
  auto const& api = opencl_state();
  for (auto& [key, program] : programs) api.clReleaseProgram(program);
}

loaded_kernel& opencl_kernel_cache::load(kernel const& k, execution_mode mode,
                                         kernel_id const& id) {
  auto const* payload = k.opencl_source();
  if (!payload) throw launch_error(fmt::format("kernel '{}' has no OpenCL payload", k.name()));
  auto const options = opencl_compiler::build_options(*payload, mode);
  return kernels_.insert(id, code_of(k, *payload, options),
                         [&] { return make_kernel(k, *payload, options); });
}

loaded_kernel opencl_kernel_cache::make_kernel(kernel const& k,
                                               opencl_source_payload const& payload,
                                               std::string const& options) {
  cl_program program = program_for(k, payload, options);
  cl_int err = CL_SUCCESS;
  cl_kernel handle = opencl().clCreateKernel(program, payload.entry_point.c_str(), &err);
  if (err == CL_INVALID_KERNEL_NAME) {
    throw launch_error(fmt::format("kernel '{}': its OpenCL source has no kernel named '{}'",
                                   k.name(), payload.entry_point));
  }
  check(err, "clCreateKernel", errc::launch_error);
  auto const& api = opencl();
  cl_uint args = 0;
  std::size_t group = 0;
  cl_int const a = api.clGetKernelInfo(handle, CL_KERNEL_NUM_ARGS, sizeof args, &args, nullptr);
  cl_int const g = api.clGetKernelWorkGroupInfo(handle, device_.device, CL_KERNEL_WORK_GROUP_SIZE,
                                                sizeof group, &group, nullptr);
  if (a != CL_SUCCESS || g != CL_SUCCESS) {
    api.clReleaseKernel(handle);
    check(a != CL_SUCCESS ? a : g,
          a != CL_SUCCESS ? "clGetKernelInfo" : "clGetKernelWorkGroupInfo");
  }
  loaded_kernel loaded;
  loaded.kernel = handle;
  loaded.num_args = args;
  loaded.max_work_group = group;
  try {
    loaded.name = k.name();
  } catch (...) {
    api.clReleaseKernel(handle);
    throw;
  }
  return loaded;
}

cl_program opencl_kernel_cache::program_for(kernel const& k, opencl_source_payload const& payload,
                                            std::string const& options) {
  auto key = std::pair{payload.source, options};
  if (auto it = programs_.programs.find(key); it != programs_.programs.end()) return it->second;
  std::optional<built_program> ahead;
  {
    auto const code = program_key(payload.source, options);
    std::lock_guard lock(ahead_->mutex);
    ahead_->held.insert(code);
    if (auto it = ahead_->programs.find(code); it != ahead_->programs.end()) {
      ahead = it->second;
      ahead_->programs.erase(it);
    }
  }
  auto const built = ahead ? *ahead : compiler_.build(k, payload, options);
  if (ahead) {
    ++kernels_.stats().built_ahead;
  } else {
    (built.from_disk_cache ? kernels_.stats().disk_hits : kernels_.stats().built) += 1;
  }
  try {
    programs_.programs.emplace(std::move(key), built.program);
  } catch (...) {
    opencl_state().clReleaseProgram(built.program);
    throw;
  }
  return built.program;
}

}  // namespace cubert::opencl::detail
