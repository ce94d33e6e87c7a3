include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(CUBERT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/cubert)
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
