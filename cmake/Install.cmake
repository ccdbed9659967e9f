# cmake --install, and find_package(fp8attn) for consumers.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS fp8attn EXPORT fp8attnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/fp8attn DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT fp8attnTargets NAMESPACE fp8attn:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/fp8attn)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/fp8attnConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/fp8attnConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/fp8attn)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/fp8attnConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/fp8attnConfig.cmake ${PROJECT_BINARY_DIR}/fp8attnConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/fp8attn)
