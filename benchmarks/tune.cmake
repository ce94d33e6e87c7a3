# Autotune: cost of a cache hit on the execute path, tuning cost against the candidates' own
# sample time, winner stability across fresh processes on the CPU backend, and a family's
# process-level figures (stability of its choices, warm start, processes sharing the tuning).
cubert_add_benchmark(tune_bench SOURCES ${CMAKE_CURRENT_LIST_DIR}/tune_bench.cpp)
cubert_add_benchmark(tune_stability_bench SOURCES ${CMAKE_CURRENT_LIST_DIR}/tune_stability_bench.cpp)
cubert_add_benchmark(tune_family_bench SOURCES ${CMAKE_CURRENT_LIST_DIR}/tune_family_bench.cpp
                     LIBS cubert::ops)
