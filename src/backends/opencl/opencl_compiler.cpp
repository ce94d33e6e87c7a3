// SPDX-License-Identifier: Apache-2.0
#include "opencl_compiler.hpp"

#include "kernel/compiled_kernel_cache.hpp"
#include "kernel/include_scan.hpp"
#include "opencl_library.hpp"

#include <cubert/error.hpp>
#include <cubert/logging.hpp>

#include <fmt/format.h>

#include <charconv>
#include <cstddef>

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

// The program's binary for its one device; none where the platform keeps none (some build at
// every load).
std::optional<std::vector<std::byte>> program_binary(cl_program program) {
  auto const& api = opencl_state();
  std::size_t size = 0;
  if (api.clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) !=
          CL_SUCCESS ||
      size == 0) {
    return std::nullopt;
  }
  std::vector<std::byte> binary(size);
  auto* data = reinterpret_cast<unsigned char*>(binary.data());
  if (api.clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof data, &data, nullptr) !=
      CL_SUCCESS) {
    return std::nullopt;
  }
  return binary;
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

// The physical line (1-based) of the last `#line 1 "` directive at the start of a line, or 0.
std::size_t directive_line(std::string_view source) {
  constexpr std::string_view directive = "#line 1 \"";
  std::size_t line = 1;
  std::size_t found = 0;
  for (std::size_t pos = 0; pos < source.size();) {
    if (source.substr(pos, directive.size()) == directive) found = line;
    auto const end = source.find('\n', pos);
    if (end == std::string_view::npos) break;
    pos = end + 1;
    ++line;
  }
  return found;
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

std::string source_lines_in_log(std::string log, std::string_view source) {
  auto const first = directive_line(source);
  if (first == 0) return log;
  constexpr std::string_view tag = "<kernel>:";
  std::string out;
  out.reserve(log.size());
  std::size_t pos = 0;
  for (auto at = log.find(tag); at != std::string::npos; at = log.find(tag, pos)) {
    auto const digits = at + tag.size();
    std::size_t n = 0;
    auto const* begin = log.data() + digits;
    auto const [end, ec] = std::from_chars(begin, log.data() + log.size(), n);
    out.append(log, pos, digits - pos);
    pos = digits;
    if (ec != std::errc{} || end == begin || n <= first) continue;
    out += std::to_string(n - first);
    pos = static_cast<std::size_t>(end - log.data());
  }
  out.append(log, pos);
  return out;
}

std::string opencl_compiler::build_options(opencl_source_payload const& payload,
                                           execution_mode mode) {
  std::string out;
  for (auto const& o : payload.options) {
    out += o;
    out += ' ';
  }
  out += mode == execution_mode::checked ? "-DCUBERT_CHECKED=1" : "-DCUBERT_CHECKED=0";
  return out;
}

built_program opencl_compiler::build(kernel const& k, opencl_source_payload const& payload,
                                     std::string const& options) const {
  program_disk_key disk_key;
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
    }
  }
  auto built = cubert::detail::compile_through<cl_program>(
      disk_, disk_key.key,
      [&](std::vector<std::byte> const& binary) { return from_binary(binary, options); },
      [&] { return from_source(k, payload, options); },
      [](cl_program program) { return program_binary(program); },
      [&] { return included_files_digest(payload.source, options) == disk_key.headers; });
  return {built.code, built.from_disk};
}

std::optional<cl_program> opencl_compiler::from_binary(std::vector<std::byte> const& binary,
                                                       std::string const& options) const noexcept {
  auto const& api = opencl_state();
  std::size_t const size = binary.size();
  auto const* data = reinterpret_cast<unsigned char const*>(binary.data());
  cl_int status = CL_SUCCESS;
  cl_int err = CL_SUCCESS;
  cl_program program =
      api.clCreateProgramWithBinary(context_, 1, &device_.device, &size, &data, &status, &err);
  if (err != CL_SUCCESS || status != CL_SUCCESS || !program) {
    if (program) api.clReleaseProgram(program);
    return std::nullopt;  // A binary this platform no longer takes: built from source instead.
  }
  if (api.clBuildProgram(program, 1, &device_.device, options.c_str(), nullptr, nullptr) !=
      CL_SUCCESS) {
    api.clReleaseProgram(program);
    return std::nullopt;
  }
  return program;
}

cl_program opencl_compiler::from_source(kernel const& k, opencl_source_payload const& payload,
                                        std::string const& options) const {
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

}  // namespace cubert::opencl::detail
