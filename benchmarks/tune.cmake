# Autotune: cost of a cache hit on the execute path, tuning cost against the candidates' own
# sample time, and winner stability across fresh processes on the CPU backend.
cubert_add_benchmark(tune_bench SOURCES ${CMAKE_CURRENT_LIST_DIR}/tune_bench.cpp)
cubert_add_benchmark(tune_stability_bench SOURCES ${CMAKE_CURRENT_LIST_DIR}/tune_stability_bench.cpp)
