// SPDX-License-Identifier: Apache-2.0
// NVRTC, loaded with dlopen at first use like the driver: a binary with the CUDA backend starts
// where the toolkit is not installed, and only compiling CUDA C++ needs it (PTX and cubin run).
#pragma once

#include <nvrtc.h>

#include <string>

namespace cubert::cuda::detail {

#define CUBERT_NVRTC_FUNCTIONS(X) \
  X(nvrtcVersion)                 \
  X(nvrtcGetErrorString)          \
  X(nvrtcGetNumSupportedArchs)    \
  X(nvrtcGetSupportedArchs)       \
  X(nvrtcCreateProgram)           \
  X(nvrtcDestroyProgram)          \
  X(nvrtcCompileProgram)          \
  X(nvrtcGetProgramLogSize)       \
  X(nvrtcGetProgramLog)           \
  X(nvrtcGetPTXSize)              \
  X(nvrtcGetPTX)                  \
  X(nvrtcGetCUBINSize)            \
  X(nvrtcGetCUBIN)

struct nvrtc_api {
  bool loaded = false;
  std::string failure;  ///< Why NVRTC could not be loaded (empty when loaded).
  std::string file;     ///< The library file loaded, as dlopen was given it.
#define CUBERT_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  CUBERT_NVRTC_FUNCTIONS(CUBERT_NVRTC_MEMBER)
#undef CUBERT_NVRTC_MEMBER
};

/// NVRTC as loaded at first use (never unloaded). Looked for at the path the build found it
/// (CUBERT_NVRTC_LIBRARY), then by its versioned name through the dynamic linker's search,
/// then under $CUDA_PATH, $CUDA_HOME and /usr/local/cuda. The environment variable
/// CUBERT_NVRTC_LIBRARY names the one file to load instead. @throws std::bad_alloc when the
/// host has no memory for the first look (the next call looks again).
[[nodiscard]] nvrtc_api const& nvrtc_state();

/// The loaded NVRTC. @throws unsupported naming why it could not be loaded.
[[nodiscard]] nvrtc_api const& nvrtc();

}  // namespace cubert::cuda::detail
