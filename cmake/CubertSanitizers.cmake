# Sanitizers apply to everything built in this tree (tests and the libraries they exercise).
if(CUBERT_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "cubert: CUBERT_BUILD_FUZZERS needs clang (libFuzzer), not ${CMAKE_CXX_COMPILER_ID}")
  endif()
  # Coverage for libFuzzer in everything the targets call; the targets link the driver.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
if(CUBERT_SANITIZE)
  set(_cubert_san_list ${CUBERT_SANITIZE})
  # GCC leaves float-cast-overflow out of "undefined", yet a double past an integer's range cast
  # to it is undefined behaviour (sizes and averages kept as doubles are cast back to bytes).
  if("undefined" IN_LIST _cubert_san_list)
    list(APPEND _cubert_san_list float-cast-overflow)
  endif()
  string(REPLACE ";" "," _cubert_san "${_cubert_san_list}")
  add_compile_options(-fsanitize=${_cubert_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_cubert_san})
  message(STATUS "cubert: sanitizers ${_cubert_san}")
endif()
