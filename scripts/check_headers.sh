#!/usr/bin/env bash
# Compiles every library header alone, in a clang build of its own (build-headers/), to find
# the missing includes that unity builds hide (NOTE [ Every header on its own ] in
# cmake/VlrnnHeadersAlone.cmake). About 1.5 minutes on 2 cores; extra arguments go to cmake.
# VLRNN_SKIP_HEADERS=1 skips it (scripts/test_debian13.sh: the headers are the same on both
# releases).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${VLRNN_SKIP_HEADERS:-0} == 1 ]]; then
  echo "check_headers.sh: skipped (VLRNN_SKIP_HEADERS=1)"
  exit 0
fi
if ! command -v clang++ > /dev/null 2>&1; then
  echo "vlrnn: error: the header check needs clang++; scripts/install_deps.sh installs it" >&2
  exit 2
fi
generator=()
if command -v ninja > /dev/null 2>&1; then generator=(-G Ninja); fi
if [[ ! -f build-headers/CMakeCache.txt ]] || (($#)); then
  # The library's targets only: nothing else is configured, and only the check is built.
  cmake -S . -B build-headers "${generator[@]}" -DCMAKE_CXX_COMPILER=clang++ \
        -DVLRNN_CHECK_HEADERS=ON -DVLRNN_BUILD_TOOLS=OFF -DVLRNN_BUILD_TESTS=OFF \
        -DVLRNN_BUILD_BENCHMARKS=OFF -DVLRNN_BUILD_EXAMPLES=OFF -DVLRNN_BUILD_PYTHON=OFF \
        -DVLRNN_BUILD_FUZZERS=OFF -DVLRNN_OPENMP=OFF "$@" > /dev/null
fi
cmake --build build-headers --target vlrnn_headers_alone --parallel "$(nproc)"
