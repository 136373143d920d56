#!/usr/bin/env bash
# Configures and builds VLRNN in Release into build/ (extra arguments go to cmake).
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
# ccache, where a developer installed it, makes rebuilds in fresh clones and worktrees
# cheap; a machine without it builds as usual.
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
if [[ ! -f build/CMakeCache.txt ]]; then
  cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@"
elif (($#)); then
  cmake -S . -B build "$@"
fi
# Each LibTorch translation unit takes ~1.5 GiB to compile: cap the jobs by memory as well.
jobs=$(nproc)
mem_gib=$(awk '/MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo)
if ((mem_gib / 2 < jobs)); then jobs=$((mem_gib / 2 > 0 ? mem_gib / 2 : 1)); fi
cmake --build build --parallel "$jobs"
