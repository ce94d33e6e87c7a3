# Build time: CI builds the tree three times (dev, ASan + UBSan, TSan) on two cores.
# lld links a test executable several times faster than ld.bfd; the link options stay on this
# project's targets (they are not exported, so a project using the installed package keeps its
# own linker). Where lld is missing (the GPU machine) the default linker is used.
if(CUBERT_FAST_LINKER)
  include(CheckLinkerFlag)
  check_linker_flag(CXX "-fuse-ld=lld" CUBERT_HAVE_LLD)
  if(CUBERT_HAVE_LLD)
    add_link_options(-fuse-ld=lld)
    message(STATUS "cubert: linking with lld")
  endif()
endif()
