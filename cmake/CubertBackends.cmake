# The backends a build knows, in the order devices are listed, each either built (registered by
# its library's CMakeLists.txt) or left out (with what would build it). src/runtime generates
# the registry's table from this list, so adding a backend edits no registry code.

# cubert_register_backend(<name>): the backend's library defines
# `cubert::backend::<name>_entry()` (src/core/device/backend_entry.hpp).
function(cubert_register_backend name)
  set_property(GLOBAL APPEND PROPERTY CUBERT_KNOWN_BACKENDS "${name}")
  set_property(GLOBAL PROPERTY CUBERT_BACKEND_BUILT_${name} TRUE)
endfunction()

# cubert_missing_backend(<name> <note>): a backend this build leaves out; `note` says why, to
# users of cubert::backends() and make_client("<name>:N") (no double quotes in it).
function(cubert_missing_backend name note)
  set_property(GLOBAL APPEND PROPERTY CUBERT_KNOWN_BACKENDS "${name}")
  set_property(GLOBAL PROPERTY CUBERT_BACKEND_NOTE_${name} "${note}")
endfunction()
