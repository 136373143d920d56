#!/usr/bin/env bash
# A machine without LibTorch gets told what to install, not only which config file CMake
# missed (cmake/VlrnnDependencies.cmake): configuring with find_package(Torch) disabled must
# fail and name scripts/install_deps.sh and the pip route.
# Usage: test_without_torch.sh SOURCE_DIR
set -euo pipefail
source_dir=${1:?usage: test_without_torch.sh SOURCE_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
generator=()  # as scripts/build.sh chooses (a machine may have ninja and no make)
if command -v ninja > /dev/null 2>&1; then generator=(-G Ninja); fi
if out=$(cmake -S "$source_dir" -B "$work" "${generator[@]}" \
               -DCMAKE_DISABLE_FIND_PACKAGE_Torch=TRUE 2>&1); then
  echo "$out"
  echo "FAIL: configuring without LibTorch succeeded"
  exit 1
fi
out=$(tr -s ' \n' ' ' <<< "$out")  # CMake wraps its message's lines
for hint in "VLRNN needs LibTorch" "scripts/install_deps.sh" "torch.utils.cmake_prefix_path"; do
  if [[ $out != *"$hint"* ]]; then
    echo "$out"
    echo "FAIL: the error does not say '$hint'"
    exit 1
  fi
done
echo "PASSED: without LibTorch, configuring fails and names what to install"
