# Every dependency comes from a system package (Debian / Ubuntu), found through its CMake config.
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3.9 REQUIRED)
find_package(tomlplusplus 3 REQUIRED)
find_package(Threads REQUIRED)

# xxHash ships no CMake config; it is used header-only (XXH_INLINE_ALL), so no library is linked.
find_path(CUBERT_XXHASH_INCLUDE_DIR xxhash.h REQUIRED)
add_library(cubert_xxhash INTERFACE)
target_include_directories(cubert_xxhash SYSTEM INTERFACE $<BUILD_INTERFACE:${CUBERT_XXHASH_INCLUDE_DIR}>)
target_compile_definitions(cubert_xxhash INTERFACE XXH_INLINE_ALL)

if(CUBERT_BUILD_TOOLS)
  find_package(CLI11 REQUIRED)
endif()
if(CUBERT_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(CUBERT_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()

set(CUBERT_HAS_CUDA OFF)
if(CUBERT_BUILD_CUDA)
  find_package(CUDAToolkit QUIET)
  # The backend names driver entry points and enums of CUDA 12.8 (im2col-wide tensor maps): an
  # older toolkit (a distribution's package) would fail to compile it, and the CPU build with it.
  set(_cubert_cuda_minimum 12.8)
  if(NOT CUDAToolkit_FOUND)
    message(STATUS "cubert: CUDA toolkit not found; CUDA backend OFF")
  elseif(CUDAToolkit_VERSION VERSION_LESS _cubert_cuda_minimum)
    message(STATUS "cubert: CUDA toolkit ${CUDAToolkit_VERSION} is older than "
                   "${_cubert_cuda_minimum}; CUDA backend OFF")
  elseif(NOT CUDA_nvrtc_LIBRARY)
    message(STATUS "cubert: CUDA toolkit ${CUDAToolkit_VERSION} has no NVRTC; CUDA backend OFF")
  else()
    set(CUBERT_HAS_CUDA ON)
    message(STATUS "cubert: CUDA backend ON (toolkit ${CUDAToolkit_VERSION})")
  endif()
endif()

# OpenCL: the API headers only (Debian/Ubuntu opencl-headers); the ICD loader is opened at run
# time, so nothing is linked and no platform is needed to build.
set(CUBERT_HAS_OPENCL OFF)
if(CUBERT_BUILD_OPENCL)
  find_path(CUBERT_OPENCL_INCLUDE_DIR NAMES CL/cl.h DOC "cubert: where CL/cl.h is")
  if(CUBERT_OPENCL_INCLUDE_DIR)
    set(CUBERT_HAS_OPENCL ON)
    message(STATUS "cubert: OpenCL backend ON (headers in ${CUBERT_OPENCL_INCLUDE_DIR})")
  else()
    message(STATUS "cubert: OpenCL headers (CL/cl.h) not found; OpenCL backend OFF")
  endif()
endif()
