# The kernel library against its peers in the same run: the CPU GEMM engine against OpenBLAS
# (when OpenBLAS is installed), and a grid of GPU-sized cubes on the CPU device against an
# OpenMP loop (the dispatch cost a portable kernel pays there).
find_library(CUBERT_OPENBLAS_LIBRARY NAMES openblas)
find_path(CUBERT_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas)
if(CUBERT_OPENBLAS_LIBRARY AND CUBERT_CBLAS_INCLUDE_DIR)
  cubert_add_benchmark(ops_cpu_gemm_bench SOURCES ${CMAKE_CURRENT_LIST_DIR}/ops_cpu_gemm_bench.cpp
                       LIBS cubert::ops ${CUBERT_OPENBLAS_LIBRARY})
  target_include_directories(ops_cpu_gemm_bench PRIVATE ${PROJECT_SOURCE_DIR}/src/ops/cpu
                                                        ${CUBERT_CBLAS_INCLUDE_DIR})
else()
  message(STATUS "cubert: OpenBLAS not found: ops_cpu_gemm_bench is not built")
endif()
find_package(OpenMP COMPONENTS CXX)
if(OpenMP_CXX_FOUND)
  cubert_add_benchmark(ops_cpu_cubes_bench SOURCES ${CMAKE_CURRENT_LIST_DIR}/ops_cpu_cubes_bench.cpp
                       LIBS cubert::ops OpenMP::OpenMP_CXX)
  set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/ops_cpu_cubes_bench.cpp APPEND PROPERTY
               COMPILE_OPTIONS -O2)
endif()
# The portable matmul's best candidate against CLBlast on the first OpenCL device (PoCL in CI),
# same context, queue and buffers.
find_library(CUBERT_CLBLAST_LIBRARY NAMES clblast)
if(CUBERT_HAS_OPENCL AND CUBERT_CLBLAST_LIBRARY)
  cubert_add_benchmark(ops_opencl_matmul_bench
                       SOURCES ${CMAKE_CURRENT_LIST_DIR}/ops_opencl_matmul_bench.cpp
                       LIBS cubert::ops ${CUBERT_CLBLAST_LIBRARY} OpenCL)
  target_include_directories(ops_opencl_matmul_bench PRIVATE ${PROJECT_SOURCE_DIR}/src)
else()
  message(STATUS "cubert: CLBlast not found: ops_opencl_matmul_bench is not built")
endif()
