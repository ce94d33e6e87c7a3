// SPDX-License-Identifier: Apache-2.0
// NVRTC with its log kept, and the parse of ptxas's resource report, for the wgmma tests.
#include "matmul_wgmma_support.hpp"

#include <cubert/portable.hpp>

#include <fmt/format.h>

#include <dlfcn.h>
#include <regex>
#include <sstream>

namespace cubert::ops::gpu::test {

/// The NVRTC entry points used (nvrtcProgram is an opaque pointer; results are ints).
struct nvrtc_logged::impl {
  using program = void*;
  int (*create)(program*, char const*, char const*, int, char const* const*,
                char const* const*) = nullptr;
  int (*compile)(program, int, char const* const*) = nullptr;
  int (*log_size)(program, std::size_t*) = nullptr;
  int (*log)(program, char*) = nullptr;
  int (*destroy)(program*) = nullptr;
};

nvrtc_logged const* nvrtc_logged::get() {
  static nvrtc_logged const* const api = []() -> nvrtc_logged* {
    void* lib = nullptr;
    for (char const* name :
         {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "/usr/local/cuda/lib64/libnvrtc.so"}) {
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    }
    if (!lib) return nullptr;
    auto* a = new nvrtc_logged;
    a->impl_ = new impl;
    auto& f = *a->impl_;
    auto const sym = [&](auto& fn, char const* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      return fn != nullptr;
    };
    if (!sym(f.create, "nvrtcCreateProgram") || !sym(f.compile, "nvrtcCompileProgram") ||
        !sym(f.log_size, "nvrtcGetProgramLogSize") || !sym(f.log, "nvrtcGetProgramLog") ||
        !sym(f.destroy, "nvrtcDestroyProgram")) {
      return nullptr;
    }
    return a;
  }();
  return api;
}

nvrtc_outcome nvrtc_logged::compile(std::string const& source,
                                    std::vector<std::string> const& options) const {
  auto const& f = *impl_;
  std::string const text = std::string(portable::cuda_prelude) + source;
  impl::program prog = nullptr;
  if (int const r = f.create(&prog, text.c_str(), "kernel.cu", 0, nullptr, nullptr); r != 0) {
    return {false, fmt::format("nvrtcCreateProgram: {}", r)};
  }
  std::vector<char const*> argv;
  for (auto const& o : options) argv.push_back(o.c_str());
  int const result = f.compile(prog, static_cast<int>(argv.size()), argv.data());
  std::size_t size = 0;
  f.log_size(prog, &size);
  std::string log(size, '\0');
  if (size != 0) f.log(prog, log.data());
  f.destroy(&prog);
  if (result != 0) log = fmt::format("nvrtcCompileProgram: {}\n{}", result, log);
  return {result == 0, log};
}

ptxas_report parse_ptxas(std::string const& log) {
  ptxas_report r;
  std::smatch m;
  static std::regex const regs(R"(Used (\d+) registers)");
  static std::regex const frame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  if (std::regex_search(log, m, regs)) r.registers = std::stoi(m[1]);
  if (std::regex_search(log, m, frame)) {
    r.stack_bytes = std::stoi(m[1]);
    r.spill_stores = std::stoi(m[2]);
    r.spill_loads = std::stoi(m[3]);
  }
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("arning") != std::string::npos || line.find("erformance") != std::string::npos ||
        line.find("dvisory") != std::string::npos) {
      r.warnings.push_back(line);
    }
  }
  return r;
}

}  // namespace cubert::ops::gpu::test
