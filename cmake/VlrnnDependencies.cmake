# Finds LibTorch and fmt (what the library needs); CLI11, nlohmann-json, GoogleTest and Google
# Benchmark only when their options are on, so an offline GPU machine without them can still
# build the library and the tool.

if(NOT DEFINED Torch_DIR AND NOT DEFINED CMAKE_PREFIX_PATH)
  # A CUDA machine's PyTorch wheel carries a LibTorch: use it when nothing else was named.
  execute_process(
    COMMAND python3 -c "import torch; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _vlrnn_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
find_package(Torch QUIET)
if(NOT Torch_FOUND AND _vlrnn_torch_prefix)
  list(APPEND CMAKE_PREFIX_PATH ${_vlrnn_torch_prefix})
  find_package(Torch QUIET)
endif()
if(NOT Torch_FOUND)
  # CMake's own message names config files; a newcomer needs the package that provides them.
  message(FATAL_ERROR "VLRNN needs LibTorch, and found none"
          " (Torch_DIR: '${Torch_DIR}', CMAKE_PREFIX_PATH: '${CMAKE_PREFIX_PATH}').\n"
          "On Debian: scripts/install_deps.sh (it installs libtorch-dev and the rest).\n"
          "With a pip torch: -DCMAKE_PREFIX_PATH=\"$(python3 -c 'import torch; "
          "print(torch.utils.cmake_prefix_path)')\"")
endif()
message(STATUS "VLRNN: LibTorch ${Torch_VERSION} from ${Torch_DIR}")
# A LibTorch built with CUDA says so in one of these, depending on its version: its CUDA
# config (CAFFE2_USE_CUDA), its targets (torch_cuda) or the library it found (c10_cuda).
if(CAFFE2_USE_CUDA OR TARGET torch_cuda OR C10_CUDA_LIBRARY)
  set(VLRNN_TORCH_HAS_CUDA ON)
else()
  set(VLRNN_TORCH_HAS_CUDA OFF)
endif()

# NOTE [ OpenMP for our own loops ]: Debian's LibTorch parallelises with OpenMP, and its
# at::parallel_for is a header template that splits the work only in a file compiled with
# OpenMP (_OPENMP defined); elsewhere it runs the whole range on the calling thread. Our
# cells' fused loops (lstm_block's gates, linear_scan's sequential kernel) call it, so the
# library is compiled with OpenMP, and so is what links it: GCC's runtime, libgomp, the one
# Debian's LibTorch already loads (a pip wheel's LibTorch carries its own copy of libgomp;
# not tried here). A LibTorch with its own thread pool (AT_PARALLEL_NATIVE) does not need it
# and is not harmed by it. Without OpenMP the library still builds; its loops then run on
# one thread, whatever --threads says. VLRNN_OPENMP=OFF builds without it on purpose (the
# fuzz build, which compiles no loop: scripts/build_fuzzers.sh).
if(VLRNN_OPENMP)
  find_package(OpenMP COMPONENTS CXX QUIET)
endif()
if(VLRNN_OPENMP AND NOT OpenMP_CXX_FOUND)
  message(WARNING "VLRNN: this compiler has no OpenMP; the cells' own loops (lstm_block, "
                  "linear_scan) will run on one thread whatever --threads says")
endif()

# fmt: the system package, or header-only from a carried include folder (VLRNN_FMT_INCLUDE).
# The layer libraries link VLRNN_FMT_LINK privately: fmt::fmt (an installed consumer then
# finds fmt too), or the header-only target, whose FMT_HEADER_ONLY stays in this build.
find_package(fmt QUIET)
add_library(vlrnn_fmt INTERFACE)
add_library(vlrnn::fmt ALIAS vlrnn_fmt)
if(fmt_FOUND)
  target_link_libraries(vlrnn_fmt INTERFACE fmt::fmt)
  set(VLRNN_FMT_LINK fmt::fmt)
else()
  find_path(VLRNN_FMT_INCLUDE fmt/format.h REQUIRED)
  target_include_directories(vlrnn_fmt INTERFACE ${VLRNN_FMT_INCLUDE})
  target_compile_definitions(vlrnn_fmt INTERFACE FMT_HEADER_ONLY=1)
  set(VLRNN_FMT_LINK $<BUILD_INTERFACE:vlrnn_fmt>)
endif()

# Only the command-line tool and what is built on it (tests, benchmarks) need these, and the
# header check compiles experiments/lib's headers too.
if(VLRNN_BUILD_TOOLS OR VLRNN_BUILD_TESTS OR VLRNN_BUILD_BENCHMARKS OR VLRNN_CHECK_HEADERS)
  find_path(VLRNN_JSON_INCLUDE nlohmann/json.hpp REQUIRED)
  # zlib: the gzip-compressed IDX files of Fashion-MNIST (experiments/lib/idx_file.h);
  # without it only uncompressed files are read.
  find_package(ZLIB QUIET)
endif()
if(VLRNN_BUILD_TOOLS)
  find_path(VLRNN_CLI11_INCLUDE CLI/CLI.hpp REQUIRED)
endif()

if(VLRNN_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(VLRNN_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()

# vlrnn_use_torch_pch(<target>)
# Precompiling <torch/torch.h> once turns a 13 s compile of every file into a few seconds.
# vlrnn_core builds the one precompiled header and every other target reuses it (each
# header precompiled again cost about 45 s of a 2-core build's CPU). GCC accepts a PCH
# only when -fPIC/-fPIE and the definitions match, so every target that reuses it is
# compiled -fPIC, executables too (their code links into a PIE all the same), and links fmt
# as vlrnn_core does, for its definitions (FMT_SHARED), even where it calls no fmt. A PCH
# GCC refuses is no error, only -Winvalid-pch's warning and a slow build.
function(vlrnn_use_torch_pch target)
  if(NOT VLRNN_PCH)
    return()
  endif()
  if(target STREQUAL "vlrnn_core")
    target_precompile_headers(${target} PRIVATE <torch/torch.h> <fmt/format.h>)
    return()
  endif()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    target_compile_options(${target} PRIVATE -fPIC)  # the property would give -fPIE
  else()
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  endif()
  target_link_libraries(${target} PRIVATE ${VLRNN_FMT_LINK})
  target_precompile_headers(${target} REUSE_FROM vlrnn_core)
endfunction()

# vlrnn_compile_as_glue(<target>)
# NOTE [ Glue compiled for build time ]: the tests spend nothing measurable at run time in
# their own code (the work is the engine's), but -O3 makes each test file a third slower to
# compile, and they are a third of the build. In optimised builds they get -Og instead:
# still optimised, so GCC accepts the -O3 precompiled header they reuse from vlrnn_core.
# Not the other way round: the PCH stays the engine's, at the build type's flags (an -O3
# benchmark reusing an -Og PCH crashed GCC 12's IPA pass). Everything that is timed (the
# engine's layers, vlrnn_experiments' runner, the tool, the benchmarks) keeps the build
# type's flags. GCC 13 and later on x86 also compare two target options that -O2 turns on
# and -Og does not; the glue turns them on as well, or GCC 14 sets the PCH aside
# (-Winvalid-pch: "differing settings of '-munroll-only-small-loops'", then '-mvzeroupper')
# and parses LibTorch again for every test unit.
function(vlrnn_compile_as_glue target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE $<$<CONFIG:Release,RelWithDebInfo>:-Og>)
  endif()
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 13
     AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|i[3-6]86)$")
    target_compile_options(${target} PRIVATE
      "$<$<CONFIG:Release,RelWithDebInfo>:-munroll-only-small-loops;-mvzeroupper>")
  endif()
endfunction()
