#!/usr/bin/env bash
# Configures and builds the libFuzzer targets (tests/fuzz/) with clang into build-fuzz/
# (build-fuzz/fuzz/fuzz_*): the parsers' own files only (tests/fuzz/CMakeLists.txt says
# which link the GCC build). scripts/fuzz.sh runs them; extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang++ >/dev/null 2>&1; then
  echo "vlrnn: error: the fuzz targets need clang++ (and libFuzzer: libclang-rt-dev, on Debian 12 libclang-rt-14-dev);" \
       "scripts/install_deps.sh installs them" >&2
  exit 2
fi
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
# The config loaders' targets link the GCC build's libraries (NOTE [ Config loaders link the
# GCC build ] in tests/fuzz/CMakeLists.txt): build/ (or $VLRNN_FUZZ_LINK_BUILD) once it is built.
link_build="${VLRNN_FUZZ_LINK_BUILD:-$PWD/build}"
if [[ ! -f "$link_build/experiments/libvlrnn_experiments.a" ]]; then
  echo "vlrnn: note: $link_build is not built (scripts/build.sh): fuzzing the parsers without" \
       "the config loaders" >&2
  link_build=""
fi
configured="$(sed -n 's/^VLRNN_FUZZ_LINK_BUILD:PATH=//p' build-fuzz/CMakeCache.txt 2>/dev/null || true)"
if [[ ! -f build-fuzz/CMakeCache.txt || "$configured" != "$link_build" ]] || (($#)); then
  # Only the library's options that the fuzz targets need: nothing else is configured.
  cmake -S . -B build-fuzz "${generator[@]}" "${launcher[@]}" -DCMAKE_CXX_COMPILER=clang++ \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVLRNN_BUILD_FUZZERS=ON -DVLRNN_BUILD_TOOLS=OFF \
        -DVLRNN_BUILD_TESTS=OFF -DVLRNN_BUILD_BENCHMARKS=OFF -DVLRNN_BUILD_EXAMPLES=OFF \
        -DVLRNN_BUILD_PYTHON=OFF -DVLRNN_PCH=OFF -DVLRNN_OPENMP=OFF \
        -DVLRNN_FUZZ_LINK_BUILD="$link_build" "$@" >/dev/null
fi
cmake --build build-fuzz --target vlrnn_fuzzers
