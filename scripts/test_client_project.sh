#!/usr/bin/env bash
# Installs an existing VLRNN build into a temporary prefix, then configures, builds and runs
# examples/client_project (copied outside the source tree) against it with find_package.
# Usage: scripts/test_client_project.sh BUILD_DIR     (run by ctest: install.client_project)
set -euo pipefail
source_dir="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
# -L: the client's own cell, indrnn.h, is a link to examples/indrnn.h in the tree.
cp -rL "$source_dir/examples/client_project" "$work/client"
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
# Only the install prefix is named: LibTorch and fmt are found by vlrnnConfig.cmake.
cmake -S "$work/client" -B "$work/client/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix"
cmake --build "$work/client/build"
output="$("$work/client/build/client")"
echo "$output"
[[ "$output" == "vlrnn loss "* ]]
grep -q "^client: 2 passed, 0 failed" <<<"$output"
