include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(CUBERT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/cubert)

# Installed binaries find their libraries relative to themselves, wherever the prefix is moved
# (NVRTC is loaded at run time: nvrtc_library.cpp).
file(RELATIVE_PATH _cubert_bin_to_lib ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
if(TARGET cubert_cli)
  set_target_properties(cubert_cli PROPERTIES INSTALL_RPATH "$ORIGIN/${_cubert_bin_to_lib}"
                                              INSTALL_RPATH_USE_LINK_PATH TRUE)
endif()
# Shared builds (-DBUILD_SHARED_LIBS=ON): each library carries its ABI version, 0.1 until 1.0,
# since a minor release may break the ABI (cubertConfigVersion accepts the same minor only).
if(BUILD_SHARED_LIBS)
  set_target_properties(${CUBERT_EXPORTED_TARGETS} PROPERTIES
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
    INSTALL_RPATH "$ORIGIN" INSTALL_RPATH_USE_LINK_PATH TRUE)
endif()
install(DIRECTORY include/cubert DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/generated/cubert/build_config.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/cubert)
install(TARGETS ${CUBERT_EXPORTED_TARGETS} cubert cubert_xxhash
        EXPORT cubertTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT cubertTargets NAMESPACE cubert:: DESTINATION ${CUBERT_INSTALL_CMAKEDIR})
math(EXPR CUBERT_FMT_NEXT_MAJOR "${fmt_VERSION_MAJOR} + 1")
configure_package_config_file(cmake/cubertConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/cubertConfig.cmake
                              INSTALL_DESTINATION ${CUBERT_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/cubertConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/cubertConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/cubertConfigVersion.cmake
        DESTINATION ${CUBERT_INSTALL_CMAKEDIR})
