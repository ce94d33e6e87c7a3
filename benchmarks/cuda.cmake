# CUDA benchmarks: built wherever the CUDA backend is (CI builds them; they report "no CUDA
# device" and exit 0 there). The PyTorch comparison (cuda_torch_bench.cpp) needs libtorch and is
# built only by scripts/gpu-check.sh on the GPU machine.
if(CUBERT_HAS_CUDA)
  # Every cuda_bench*.cpp: the program's main plus one file per group of rows.
  file(GLOB _cubert_cuda_bench_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/cuda_bench*.cpp)
  cubert_add_benchmark(cuda_bench SOURCES ${_cubert_cuda_bench_sources}
                       LIBS cubert::cuda cubert_backend_sdk)
  # The backend's own headers (it is timed against the raw driver; they reach the internal SDK)
  # and tests/support: the spin kernel shared with the autotune tests.
  target_include_directories(cuda_bench PRIVATE ${PROJECT_SOURCE_DIR}/src/backends/cuda
                                                ${PROJECT_SOURCE_DIR}/tests/support)
  target_include_directories(cuda_bench SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
endif()
