// SPDX-License-Identifier: Apache-2.0
#include "opencl_program_cache.hpp"

#include "kernel/include_scan.hpp"
#include "opencl_build_log.hpp"
#include "opencl_library.hpp"

#include <cubert/error.hpp>
#include <cubert/logging.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <cstring>
#include <string_view>
#include <vector>

namespace cubert::opencl::detail {
namespace {

std::string build_log(cl_program program, cl_device_id device) {
  auto const& api = opencl_state();
  std::size_t size = 0;
  if (api.clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) !=
          CL_SUCCESS ||
      size == 0) {
    return {};
  }
  std::string log(size, '\0');
  if (api.clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr) !=
      CL_SUCCESS) {
    return {};
  }
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// clBuildProgram takes one string; the scan reads options one word per element, as NVRTC's.
std::vector<std::string> option_words(std::string_view options) {
  std::vector<std::string> words;
  std::size_t at = 0;
  while (at < options.size()) {
    auto const start = options.find_first_not_of(" \t\n", at);
    if (start == std::string_view::npos) break;
    auto end = options.find_first_of(" \t\n", start);
    if (end == std::string_view::npos) end = options.size();
    words.emplace_back(options.substr(start, end - start));
    at = end;
  }
  return words;
}

cubert::detail::include_scan scan(std::string_view source, std::string_view options) {
  auto const words = option_words(options);
  // A program has no file name: its quoted includes are looked for in the working directory.
  return cubert::detail::scan_includes(source, "", words);
}

}  // namespace

program_disk_key disk_key_of(std::string_view source, std::string_view options,
                             std::string_view device, std::string_view platform_version) {
  program_disk_key out;
  auto const found = scan(source, options);
  if (found.truncated || found.computed) {
    out.bypass = found.truncated ? "its includes pass the include scan's limits"
                                 : "it reaches an include or __has_include naming a macro";
    return out;
  }
  out.headers = found.digest;
  // A source without includes keeps the key it had before includes were covered.
  std::string const covered =
      out.headers.empty() ? std::string(options) : fmt::format("{}\x1e{}", options, out.headers);
  out.key = cubert::detail::kernel_disk_cache::key(source, covered, device, platform_version);
  return out;
}

std::string included_files_digest(std::string_view source, std::string_view options) {
  return scan(source, options).digest;
}

opencl_program_cache::~opencl_program_cache() {
  auto const& api = opencl_state();
  for (auto& [id, k] : kernels_) api.clReleaseKernel(k->kernel);
  for (auto& [key, program] : programs_) api.clReleaseProgram(program);
}

std::string opencl_program_cache::build_options(opencl_source_payload const& payload,
                                                execution_mode mode) {
  std::string out;
  for (auto const& o : payload.options) {
    out += o;
    out += ' ';
  }
  out += mode == execution_mode::checked ? "-DCUBERT_CHECKED=1" : "-DCUBERT_CHECKED=0";
  return out;
}

loaded_kernel& opencl_program_cache::load(kernel const& k, execution_mode mode,
                                          kernel_id const& id) {
  auto const* payload = k.opencl_source();
  if (!payload) throw launch_error(fmt::format("kernel '{}' has no OpenCL payload", k.name()));
  auto const options = build_options(*payload, mode);
  cl_program program = program_for(k, *payload, options);
  cl_int err = CL_SUCCESS;
  cl_kernel handle = opencl().clCreateKernel(program, payload->entry_point.c_str(), &err);
  if (err == CL_INVALID_KERNEL_NAME) {
    throw launch_error(fmt::format("kernel '{}': its OpenCL source has no kernel named '{}'",
                                   k.name(), payload->entry_point));
  }
  check(err, "clCreateKernel", errc::launch_error);
  auto loaded = std::make_unique<loaded_kernel>();
  loaded->kernel = handle;
  loaded->name = k.name();
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
  loaded->num_args = args;
  loaded->max_work_group = group;
  try {
    return *kernels_.emplace(id, std::move(loaded)).first->second;
  } catch (...) {
    api.clReleaseKernel(handle);
    throw;
  }
}

cl_program opencl_program_cache::program_for(kernel const& k, opencl_source_payload const& payload,
                                             std::string const& options) {
  auto const key_pair = std::pair{payload.source, options};
  if (auto it = programs_.find(key_pair); it != programs_.end()) return it->second;
  program_disk_key disk_key;
  cl_program program = nullptr;
  if (disk_.enabled()) {
    // The device's name, version and driver, and the platform's version: what makes a binary.
    disk_key =
        disk_key_of(payload.source, options,
                    fmt::format("{}|{}|{}", device_.name, device_.version, device_.driver_version),
                    device_.platform_version);
    if (!disk_key.bypass.empty()) {
      log::write(log::category::compilation,
                 "opencl: kernel '{}' bypasses the kernel disk cache: {}", k.name(),
                 disk_key.bypass);
    } else if (auto binary = disk_.load(disk_key.key)) {
      program = from_binary(*binary, options);
      if (program) ++stats_.disk_hits;
    }
  }
  if (!program) {
    program = from_source(k, payload, options);
    ++stats_.built;
    // A header edited while the program built may be compiled in either version: such a binary
    // is not stored under the key of the version read before.
    if (!disk_key.key.empty() &&
        included_files_digest(payload.source, options) == disk_key.headers) {
      store_binary(program, disk_key.key);
    }
  }
  try {
    programs_.emplace(key_pair, program);
  } catch (...) {
    opencl_state().clReleaseProgram(program);
    throw;
  }
  return program;
}

cl_program opencl_program_cache::from_binary(std::vector<std::byte> const& binary,
                                             std::string const& options) noexcept {
  auto const& api = opencl_state();
  std::size_t const size = binary.size();
  auto const* data = reinterpret_cast<unsigned char const*>(binary.data());
  cl_int status = CL_SUCCESS;
  cl_int err = CL_SUCCESS;
  cl_program program =
      api.clCreateProgramWithBinary(context_, 1, &device_.device, &size, &data, &status, &err);
  if (err != CL_SUCCESS || status != CL_SUCCESS || !program) {
    if (program) api.clReleaseProgram(program);
    return nullptr;  // A binary this platform no longer takes: built from source instead.
  }
  if (api.clBuildProgram(program, 1, &device_.device, options.c_str(), nullptr, nullptr) !=
      CL_SUCCESS) {
    api.clReleaseProgram(program);
    return nullptr;
  }
  return program;
}

cl_program opencl_program_cache::from_source(kernel const& k, opencl_source_payload const& payload,
                                             std::string const& options) {
  auto const& api = opencl();
  char const* text = payload.source.c_str();
  std::size_t const length = payload.source.size();
  cl_int err = CL_SUCCESS;
  cl_program program = api.clCreateProgramWithSource(context_, 1, &text, &length, &err);
  check(err, "clCreateProgramWithSource");
  cl_int const built =
      api.clBuildProgram(program, 1, &device_.device, options.c_str(), nullptr, nullptr);
  if (built != CL_SUCCESS) {
    auto log = source_lines_in_log(build_log(program, device_.device), payload.source);
    api.clReleaseProgram(program);
    if (built == CL_OUT_OF_HOST_MEMORY) check(built, "clBuildProgram");
    throw compilation_error(
        fmt::format("kernel '{}' failed to build for {} with options '{}' ({}){}{}", k.name(),
                    device_.name, options, error_name(built), log.empty() ? "" : ":\n", log),
        log, k.name());
  }
  return program;
}

void opencl_program_cache::store_binary(cl_program program, std::string const& key) const noexcept {
  try {
    auto const& api = opencl_state();
    std::size_t size = 0;
    if (api.clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) !=
            CL_SUCCESS ||
        size == 0) {
      return;  // The platform keeps no binary (some build at every load): nothing to cache.
    }
    std::vector<std::byte> binary(size);
    auto* data = reinterpret_cast<unsigned char*>(binary.data());
    if (api.clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof data, &data, nullptr) !=
        CL_SUCCESS) {
      return;
    }
    (void)disk_.store(key, binary);
  } catch (...) {
    // Caching is a speed-up: a host short of memory builds again next time.
  }
}

}  // namespace cubert::opencl::detail
