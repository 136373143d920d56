# `cmake --install build --prefix P`: headers, the layer libraries and a CMake package, so
# that another project writes find_package(vlrnn) and links vlrnn::vlrnn. Its dependencies
# are LibTorch, OpenMP (when the compiler has it) and (when it came as a package) fmt; not
# CLI11, json, GoogleTest, benchmark.

include(CMakePackageConfigHelpers)

get_property(_vlrnn_layer_targets GLOBAL PROPERTY VLRNN_LAYER_TARGETS)
get_property(_vlrnn_layer_folders GLOBAL PROPERTY VLRNN_LAYER_FOLDERS)
foreach(folder ${_vlrnn_layer_folders})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${folder}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
install(TARGETS ${_vlrnn_layer_targets} vlrnn_lib EXPORT vlrnnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})

set(VLRNN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/vlrnn)
install(EXPORT vlrnnTargets NAMESPACE vlrnn:: DESTINATION ${VLRNN_CMAKE_DIR})

# What vlrnnConfig.cmake finds for the consumer: the same LibTorch, and fmt only when the
# libraries link fmt::fmt (header-only fmt is compiled into them).
set(VLRNN_CONFIG_TORCH_DIR "${Torch_DIR}")
if(fmt_FOUND)
  set(VLRNN_CONFIG_FIND_FMT "find_dependency(fmt HINTS \"${fmt_DIR}\")")
else()
  set(VLRNN_CONFIG_FIND_FMT "# fmt: header-only, compiled into the libraries")
endif()
if(OpenMP_CXX_FOUND)
  set(VLRNN_CONFIG_FIND_OPENMP "find_dependency(OpenMP COMPONENTS CXX)")
else()
  set(VLRNN_CONFIG_FIND_OPENMP "# OpenMP: not used by this build")
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/vlrnnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/vlrnnConfig.cmake INSTALL_DESTINATION ${VLRNN_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/vlrnnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/vlrnnConfig.cmake ${PROJECT_BINARY_DIR}/vlrnnConfigVersion.cmake
        DESTINATION ${VLRNN_CMAKE_DIR})
