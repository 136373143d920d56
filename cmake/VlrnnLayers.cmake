include(GNUInstallDirs)

# vlrnn_add_layer(<target> <folder> EXPORT_NAME <name> [DEPENDS <lower layer targets>...])
# One static library per layer folder: sources <folder>/src/**.cpp, public headers
# <folder>/include (installed as include/). Links LibTorch publicly; fmt privately, as the
# public headers do not include it (so its definitions, FMT_HEADER_ONLY, stay inside).
function(vlrnn_add_layer target folder)
  cmake_parse_arguments(arg "" "EXPORT_NAME" "DEPENDS" ${ARGN})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${folder}/src/*.cpp)
  add_library(${target} STATIC ${sources})
  add_library(vlrnn::${arg_EXPORT_NAME} ALIAS ${target})
  # PIC: an installed static library may end up inside a consumer's shared library.
  set_target_properties(${target} PROPERTIES OUTPUT_NAME ${target} EXPORT_NAME ${arg_EXPORT_NAME}
                                             POSITION_INDEPENDENT_CODE ON)
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/${folder}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${target} PUBLIC cxx_std_17)
  target_link_libraries(${target} PUBLIC ${arg_DEPENDS} ${TORCH_LIBRARIES})
  target_link_libraries(${target} PRIVATE ${VLRNN_FMT_LINK})
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  vlrnn_use_torch_pch(${target})
  set_property(GLOBAL APPEND PROPERTY VLRNN_LAYER_TARGETS ${target})
  set_property(GLOBAL APPEND PROPERTY VLRNN_LAYER_FOLDERS ${folder})
endfunction()
