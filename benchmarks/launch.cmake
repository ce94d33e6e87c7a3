# Host cost of launching an empty kernel through each channel, against a direct call and an
# OpenMP parallel region of the same width.
find_package(OpenMP REQUIRED)
cubert_add_benchmark(cubert_launch_bench SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launch_bench.cpp
                     LIBS OpenMP::OpenMP_CXX)
