// SPDX-License-Identifier: Apache-2.0
#include "cuda_compiler.hpp"

#include "kernel/compiled_kernel_cache.hpp"
#include "kernel/include_scan.hpp"
#include "nvrtc_library.hpp"

#include <cubert/error.hpp>
#include <cubert/logging.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <dlfcn.h>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>

namespace cubert::cuda::detail {

using cubert::detail::scan_includes;

namespace {

// The single conversion point for NVRTC calls other than the compilation itself.
void nvrtc_check(nvrtcResult result, char const* call) {
  if (result != NVRTC_SUCCESS) [[unlikely]] {
    throw unsupported(fmt::format("{}: {}", call, nvrtc().nvrtcGetErrorString(result)));
  }
}

struct program_deleter {
  void operator()(nvrtcProgram p) const noexcept { nvrtc_state().nvrtcDestroyProgram(&p); }
};
using program_ptr = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, program_deleter>;

std::string program_log(nvrtcProgram program) {
  std::size_t size = 0;
  if (nvrtc().nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string log(size, '\0');
  if (nvrtc().nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return {};
  log.resize(size - 1);  // Drop the terminating NUL.
  return log;
}

std::vector<std::byte> program_image(nvrtcProgram program, bool ptx) {
  std::size_t size = 0;
  std::vector<std::byte> image;
  if (ptx) {
    nvrtc_check(nvrtc().nvrtcGetPTXSize(program, &size), "nvrtcGetPTXSize");
    image.resize(size);
    nvrtc_check(nvrtc().nvrtcGetPTX(program, reinterpret_cast<char*>(image.data())), "nvrtcGetPTX");
  } else {
    nvrtc_check(nvrtc().nvrtcGetCUBINSize(program, &size), "nvrtcGetCUBINSize");
    image.resize(size);
    nvrtc_check(nvrtc().nvrtcGetCUBIN(program, reinterpret_cast<char*>(image.data())),
                "nvrtcGetCUBIN");
  }
  return image;
}

// The toolkit headers, so that sources may include <cuda_fp16.h> and friends even where NVRTC
// lacks them built in, and CUDA 13's <toolkit>/include/cccl, where <cuda/std/...> moved (which
// <cooperative_groups.h> includes: without it NVRTC could not open "cuda/std/type_traits"). Found
// at run time: the build machine's path may not exist here.
std::vector<std::string> toolkit_include_options() {
  std::vector<std::filesystem::path> candidates;
  if (char const* p = std::getenv("CUDA_PATH"); p && *p) candidates.emplace_back(p);
  if (char const* p = std::getenv("CUDA_HOME"); p && *p) candidates.emplace_back(p);
#ifdef CUBERT_CUDA_TOOLKIT_INCLUDE_DIR
  candidates.emplace_back(std::filesystem::path(CUBERT_CUDA_TOOLKIT_INCLUDE_DIR).parent_path());
#endif
  candidates.emplace_back("/usr/local/cuda");
  for (auto const& root : candidates) {
    std::error_code ec;
    if (std::filesystem::exists(root / "include" / "cuda_fp16.h", ec)) {
      std::vector<std::string> out{"--include-path=" + (root / "include").string()};
      if (std::filesystem::is_directory(root / "include" / "cccl", ec)) {
        out.push_back("--include-path=" + (root / "include" / "cccl").string());
      }
      return out;
    }
  }
  return {};
}

// Whether NVRTC has the arch-specific target sm_XXa for `arch` (which it supports): Hopper's
// since NVRTC 12.0, the later ones (sm_100a, sm_120a, ...) since 12.8. Decided from the version,
// not by a trial compile, which would cost milliseconds before every disk-cache hit.
bool has_arch_specific(int arch) {
  static int const version = [] {
    int major = 0;
    int minor = 0;
    return nvrtc().nvrtcVersion(&major, &minor) == NVRTC_SUCCESS ? major * 100 + minor : 0;
  }();
  return arch == 90 ? version >= 1200 : arch > 90 && version >= 1208;
}

// Closed when the process starts exiting, by a handler registered at the first compile. A client
// held in a static object was made before that compile, so it is destroyed after NVRTC's own
// state, and its server may still be compiling then, or have kernels queued. The handler runs
// before NVRTC's state is destroyed: it refuses new compiles and waits for those in flight. The
// gate and the statics of compile() are never destroyed: a static made after an atexit call is
// destroyed before its handler runs, and a compile in flight then would read freed memory.
struct exit_gate {
  std::mutex mutex;
  std::condition_variable idle;
  int running = 0;
  bool closed = false;
};

exit_gate& gate() {
  static auto* const g = new exit_gate;
  return *g;
}

void close_gate() noexcept {
  auto& g = gate();
  std::unique_lock lock(g.mutex);
  g.closed = true;
  g.idle.wait(lock, [&] { return g.running == 0; });
}

// A compile in flight; once the gate is closed, a compilation_error instead.
class gate_pass {
 public:
  explicit gate_pass(std::string const& source_name) {
    [[maybe_unused]] static bool const registered = std::atexit(close_gate) == 0;
    std::lock_guard lock(gate_.mutex);
    if (gate_.closed) {
      throw compilation_error(
          fmt::format("{} was not compiled: the process is exiting, and what compiling needs may "
                      "already be destroyed (a kernel still queued when a client held in a "
                      "static object is destroyed)",
                      source_name),
          {}, source_name);
    }
    ++gate_.running;
  }
  ~gate_pass() {
    std::lock_guard lock(gate_.mutex);
    if (--gate_.running == 0) gate_.idle.notify_all();
  }
  gate_pass(gate_pass const&) = delete;
  gate_pass& operator=(gate_pass const&) = delete;

 private:
  exit_gate& gate_ = gate();
};

}  // namespace

std::string cuda_compiler::nvrtc_version() {
  int major = 0;
  int minor = 0;
  nvrtc_check(nvrtc().nvrtcVersion(&major, &minor), "nvrtcVersion");
  return fmt::format("{}.{}", major, minor);
}

std::string cuda_compiler::nvrtc_identity() {
  std::string version = nvrtc_version();
  // nvrtcVersion's address lies in the library the process loaded, whichever path the dynamic
  // linker took to it; a statically linked NVRTC names the executable, whose identity changes
  // with every build, so only a file named for NVRTC counts.
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(nvrtc().nvrtcVersion), &info) == 0 || !info.dli_fname) {
    return version;
  }
  std::error_code ec;
  auto const file = std::filesystem::canonical(info.dli_fname, ec);
  if (ec || file.filename().string().find("nvrtc") == std::string::npos) return version;
  auto const size = std::filesystem::file_size(file, ec);
  if (ec) return version;
  auto const mtime = std::filesystem::last_write_time(file, ec);
  if (ec) return version;
  auto const since_epoch = std::chrono::file_clock::to_sys(mtime).time_since_epoch();
  return fmt::format("{} {} {} {}", version, file.filename().string(), size,
                     std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch).count());
}

std::vector<int> cuda_compiler::supported_archs() {
  int count = 0;
  nvrtc_check(nvrtc().nvrtcGetNumSupportedArchs(&count), "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(static_cast<std::size_t>(count));
  nvrtc_check(nvrtc().nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
  std::sort(archs.begin(), archs.end());
  return archs;
}

int cuda_compiler::newest_arch() {
  auto const archs = supported_archs();
  return archs.empty() ? 0 : archs.back();
}

compiled_code cuda_compiler::compile(compile_request const& request) const {
  if (request.arch <= 0) throw invalid_argument("cuda_compiler: the target architecture is unset");
  if (request.source.empty()) {
    throw invalid_argument(fmt::format("cuda_compiler: {} is empty", request.source_name));
  }
  gate_pass const pass(request.source_name);
  // A device NVRTC does not know — newer than it, or one it skipped (sm_103 under NVRTC 12.8,
  // whose newest is sm_120) — gets PTX for the newest architecture it has below the device's;
  // the driver JITs it. Comparing with the newest alone asked NVRTC for sm_103a, refused.
  static auto const& archs = *new std::vector<int>(supported_archs());
  bool const known = std::binary_search(archs.begin(), archs.end(), request.arch);
  auto const below = std::upper_bound(archs.begin(), archs.end(), request.arch);
  int const ptx_arch = known || below == archs.begin() ? request.arch : *std::prev(below);
  bool const ptx = request.ptx || !known;
  std::vector<std::string> options;
  // From Hopper on, the arch-specific target (sm_90a) enables wgmma, setmaxnreg and the like;
  // its cubin runs only on that architecture, which is the device compiled for. PTX stays
  // portable (compute_XX), for the driver to JIT on newer devices.
  options.push_back(ptx ? fmt::format("--gpu-architecture=compute_{}", ptx_arch)
                        : fmt::format("--gpu-architecture=sm_{}{}", request.arch,
                                      has_arch_specific(request.arch) ? "a" : ""));
  options.insert(options.end(), request.options.begin(), request.options.end());
  // The toolkit's headers last: NVRTC searches include paths in order, and a header the caller's
  // -I directories hold (a newer CCCL, say) must not be shadowed by the toolkit's copy.
  static auto const& includes = *new std::vector<std::string>(toolkit_include_options());
  options.insert(options.end(), includes.begin(), includes.end());

  std::string key;
  std::string headers;
  if (cache_.enabled()) {
    static auto const& version = *new std::string(nvrtc_identity());
    // The source name is part of the key: with -lineinfo or -G the image carries it, so a hit
    // compiled under another name would point a debugger or a profiler at the wrong file. Each
    // part is length-prefixed so that an option holding a separator cannot pass for two.
    auto joined = fmt::format("{}:{}", request.source_name.size(), request.source_name);
    for (auto const& o : options) joined += fmt::format("\x1f{}:{}", o.size(), o);
    // The user's headers, so that editing one misses; the toolkit's (not among request.options)
    // change only with the toolkit, which the NVRTC identity covers. A source without includes
    // adds nothing.
    auto const scan = scan_includes(request.source, request.source_name, request.options);
    // A scan cut short by its limits, or one that met a header named by a macro, does not name
    // every input: such a kernel bypasses the disk cache rather than risk a stale hit after an
    // edit the key cannot see.
    if (scan.truncated || scan.computed) {
      log::write(log::category::compilation, "cuda: {} bypasses the kernel disk cache: {}",
                 request.source_name,
                 scan.truncated ? "its includes pass the include scan's limits"
                                : "it reaches an include or __has_include naming a macro");
    } else {
      headers = scan.digest;
      if (!headers.empty()) joined += "\x1e" + headers;
      key = kernel_disk_cache::key(request.source, joined, ptx ? "ptx" : "cubin", version);
    }
  }
  auto cached = cubert::detail::compile_through<compiled_code>(
      cache_, key,
      [&](std::vector<std::byte> bytes) {
        return std::optional<compiled_code>(compiled_code{std::move(bytes), ptx, true, {}});
      },
      [&] { return run_nvrtc(request, options, ptx); },
      [](compiled_code const& code) { return &code.image; },
      // A rescan costs little beside NVRTC.
      [&] {
        return scan_includes(request.source, request.source_name, request.options).digest ==
               headers;
      });
  return std::move(cached.code);
}

compiled_code cuda_compiler::run_nvrtc(compile_request const& request,
                                       std::vector<std::string> const& options, bool ptx) {
  std::string const source(request.source);
  nvrtcProgram raw = nullptr;
  nvrtc_check(nvrtc().nvrtcCreateProgram(&raw, source.c_str(), request.source_name.c_str(), 0,
                                         nullptr, nullptr),
              "nvrtcCreateProgram");
  program_ptr const program(raw);
  std::vector<char const*> argv;
  argv.reserve(options.size());
  for (auto const& o : options) argv.push_back(o.c_str());
  nvrtcResult const result =
      nvrtc().nvrtcCompileProgram(raw, static_cast<int>(argv.size()), argv.data());
  // NVRTC's first compile registers exit handlers of its own that tear its state down; the gate
  // must close before they run, so it is registered again after them.
  [[maybe_unused]] static bool const after_nvrtc = std::atexit(close_gate) == 0;
  std::string log = program_log(raw);
  if (result != NVRTC_SUCCESS) {
    // Formatted first: the order arguments are evaluated in is unspecified, and g++ moved the
    // log into the exception before formatting it into the message.
    auto message = fmt::format("NVRTC failed to compile {} for {}: {}\n{}", request.source_name,
                               options.front(), nvrtc().nvrtcGetErrorString(result), log);
    throw compilation_error(std::move(message), std::move(log), request.source_name);
  }
  return compiled_code{program_image(raw, ptx), ptx, false, std::move(log)};
}

}  // namespace cubert::cuda::detail
