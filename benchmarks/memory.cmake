# Memory-manager benchmarks: pool-hit reserve/release pairs, cubecl's FIFO scenario, and the
# replay of recorded allocation traces (CUBERT_TRACE_DIR, default benchmarks/traces).
cubert_add_benchmark(memory_bench SOURCES ${CMAKE_CURRENT_LIST_DIR}/memory_bench.cpp)
set(CUBERT_TRACE_DIR "${PROJECT_SOURCE_DIR}/benchmarks/traces" CACHE PATH
    "Directory of allocation traces replayed by memory_bench")
target_compile_definitions(memory_bench PRIVATE CUBERT_DEFAULT_TRACE_DIR="${CUBERT_TRACE_DIR}")
