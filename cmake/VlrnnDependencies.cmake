# Finds LibTorch, fmt, CLI11 and nlohmann-json; GoogleTest and Google Benchmark only when
# their options are on, so an offline GPU machine without them can still build the tool.

if(NOT DEFINED Torch_DIR AND NOT DEFINED CMAKE_PREFIX_PATH)
  # A CUDA machine's PyTorch wheel carries a LibTorch: use it when nothing else was named.
  execute_process(
    COMMAND python3 -c "import torch; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _vlrnn_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
find_package(Torch QUIET)
if(NOT Torch_FOUND AND _vlrnn_torch_prefix)
  list(APPEND CMAKE_PREFIX_PATH ${_vlrnn_torch_prefix})
  find_package(Torch REQUIRED)
elseif(NOT Torch_FOUND)
  find_package(Torch REQUIRED)
endif()
message(STATUS "VLRNN: LibTorch ${Torch_VERSION} from ${Torch_DIR}")

# fmt: the system package, or header-only from a carried include folder (VLRNN_FMT_INCLUDE).
find_package(fmt QUIET)
add_library(vlrnn_fmt INTERFACE)
add_library(vlrnn::fmt ALIAS vlrnn_fmt)
if(fmt_FOUND)
  target_link_libraries(vlrnn_fmt INTERFACE fmt::fmt)
else()
  find_path(VLRNN_FMT_INCLUDE fmt/format.h REQUIRED)
  target_include_directories(vlrnn_fmt INTERFACE ${VLRNN_FMT_INCLUDE})
  target_compile_definitions(vlrnn_fmt INTERFACE FMT_HEADER_ONLY=1)
endif()

find_path(VLRNN_CLI11_INCLUDE CLI/CLI.hpp REQUIRED)
find_path(VLRNN_JSON_INCLUDE nlohmann/json.hpp REQUIRED)

if(VLRNN_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(VLRNN_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()

# Precompiling <torch/torch.h> once turns a 13 s compile of every file into a few seconds.
function(vlrnn_use_torch_pch target)
  if(VLRNN_PCH)
    target_precompile_headers(${target} PRIVATE <torch/torch.h> <fmt/format.h>)
  endif()
endfunction()
