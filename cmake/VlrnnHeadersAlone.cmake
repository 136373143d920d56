# NOTE [ Every header on its own ]: in a unity build (NOTE [ Unity builds ]) a header that
# forgets an include still compiles wherever a file before it in the unit included it, and
# breaks later, in another place, when files are added and the units regroup. So each
# library header is also compiled alone, in a file of its own: a missing include fails here,
# in the header's own name. The files share one precompiled header (LibTorch and fmt), so
# what this catches is a missing include of our own headers or of the standard library's
# beyond what LibTorch brings, which is what unity builds hide.
# Clang, not GCC: loading GCC's 600 MB precompiled LibTorch takes ~9 s a file (107 headers:
# 10 minutes of a 2-core build), clang's well under 1 s. Both use libstdc++, so what one
# finds missing the other would. scripts/check_headers.sh configures this clang build.
# Each file is compiled as a header (-x c++-header), as a PCH would be: a complete unit
# instead would instantiate, at its end, the virtual members of every LibTorch class
# template whose vtable the PCH uses (~2 s a file, for no line of ours). Our own templates
# are still instantiated where the header uses them (-fpch-instantiate-templates).
file(GLOB_RECURSE VLRNN_LIBRARY_HEADERS CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/vlrnn/include/*.h ${PROJECT_SOURCE_DIR}/baselines/include/*.h
     ${PROJECT_SOURCE_DIR}/registry/include/*.h ${PROJECT_SOURCE_DIR}/verify/include/*.h
     ${PROJECT_SOURCE_DIR}/experiments/lib/*.h)
set(VLRNN_HEADER_CHECK_SOURCES "")
foreach(header ${VLRNN_LIBRARY_HEADERS})
  # As the code includes it: from its layer's include/ folder, or experiments/ ("lib/...").
  string(REGEX REPLACE "^.*/include/|^${PROJECT_SOURCE_DIR}/experiments/" "" included
         ${header})
  string(MAKE_C_IDENTIFIER ${included} stem)
  set(source ${CMAKE_CURRENT_BINARY_DIR}/header_alone/${stem}.cpp)
  file(GENERATE OUTPUT ${source} CONTENT "#include \"${included}\"\n")
  list(APPEND VLRNN_HEADER_CHECK_SOURCES ${source})
endforeach()
add_library(vlrnn_headers_alone OBJECT ${VLRNN_HEADER_CHECK_SOURCES})
set_source_files_properties(${VLRNN_HEADER_CHECK_SOURCES} PROPERTIES
                            COMPILE_OPTIONS "-x;c++-header;-fpch-instantiate-templates")
set_target_properties(vlrnn_headers_alone PROPERTIES UNITY_BUILD OFF)
target_include_directories(vlrnn_headers_alone PRIVATE ${PROJECT_SOURCE_DIR}/experiments
                                                       ${VLRNN_JSON_INCLUDE})
target_link_libraries(vlrnn_headers_alone PRIVATE vlrnn_lib vlrnn::fmt)
# A file that only includes a header generates almost no code: nothing to optimise.
target_compile_options(vlrnn_headers_alone PRIVATE -O0 -g0)
if(VLRNN_PCH)
  target_precompile_headers(vlrnn_headers_alone PRIVATE <torch/torch.h> <fmt/format.h>)
endif()
