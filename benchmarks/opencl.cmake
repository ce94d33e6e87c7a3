# The OpenCL backend against the raw OpenCL calls on the same device (PoCL's CPU device here).
if(CUBERT_HAS_OPENCL)
  cubert_add_benchmark(cubert_opencl_bench SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/opencl_bench.cpp
                       LIBS cubert::opencl cubert_backend_sdk)
  target_include_directories(cubert_opencl_bench PRIVATE ${PROJECT_SOURCE_DIR}/src/backends/opencl
                                                         ${PROJECT_SOURCE_DIR}/tests/support)
  target_include_directories(cubert_opencl_bench SYSTEM PRIVATE ${CUBERT_OPENCL_INCLUDE_DIR})
endif()
