# * build options ---------------------------------------------------------------------------------
option(CUBERT_BUILD_TESTS "cubert: build the GoogleTest suites" ${PROJECT_IS_TOP_LEVEL})
option(CUBERT_BUILD_BENCHMARKS "cubert: build the Google Benchmark programs" OFF)
option(CUBERT_BUILD_TOOLS "cubert: build the cubert command-line tool" ${PROJECT_IS_TOP_LEVEL})
option(CUBERT_BUILD_CUDA "cubert: build the CUDA backend when the CUDA toolkit is found" ON)
option(CUBERT_BUILD_OPENCL "cubert: build the OpenCL backend when the OpenCL headers are found" ON)
option(CUBERT_WARNINGS_AS_ERRORS "cubert: treat warnings as errors on cubert targets" OFF)
set(CUBERT_SANITIZE "" CACHE STRING "cubert: sanitizers to build with: address;undefined or thread")
set_property(CACHE CUBERT_SANITIZE PROPERTY STRINGS "" "address;undefined" "thread")
