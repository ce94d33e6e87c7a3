# Sanitizers apply to everything built in this tree (tests and the libraries they exercise).
if(CUBERT_SANITIZE)
  string(REPLACE ";" "," _cubert_san "${CUBERT_SANITIZE}")
  add_compile_options(-fsanitize=${_cubert_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_cubert_san})
  message(STATUS "cubert: sanitizers ${_cubert_san}")
endif()
