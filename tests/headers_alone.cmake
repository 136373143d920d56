# NOTE [ Every header on its own ]: in a unity build (NOTE [ Unity builds ]) a header that
# forgets an include still compiles wherever a file before it in the unit included it, and
# breaks later, in another place, when files are added and the units regroup. So each
# library header is also compiled alone, in a file of its own, as part of every build: a
# missing include fails here, in the header's own name. The files reuse the tool's
# precompiled header (LibTorch and fmt: ~2 s a header, mostly its load, instead of ~10), so
# what this catches is a missing include of our own headers or of the standard library's
# beyond what LibTorch brings, which is what unity builds hide. scripts/test_debian13.sh
# turns it off (VLRNN_CHECK_HEADERS=OFF): the headers are the same on both releases.
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
set_target_properties(vlrnn_headers_alone PROPERTIES UNITY_BUILD OFF)
target_include_directories(vlrnn_headers_alone PRIVATE ${VLRNN_JSON_INCLUDE})
target_link_libraries(vlrnn_headers_alone PRIVATE vlrnn_experiments)
# The build type's flags, as the PCH's owner: GCC 14 refuses an -O3 PCH in an -Og file
# (-Winvalid-pch), and a file that only includes a header generates almost no code anyway.
vlrnn_use_torch_pch(vlrnn_headers_alone ${VLRNN_EXE_PCH_OWNER})
