#!/usr/bin/env bash
# Installs, from Debian's packages, whatever of VLRNN's dependencies this machine lacks.
# Safe to run again: it does nothing when everything is present.
set -euo pipefail

packages=(
  g++ cmake ninja-build
  libtorch-dev            # LibTorch 1.13 (CPU)
  libopenblas0-pthread    # fast BLAS: the default reference BLAS is ~30x slower
  libfmt-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev libbenchmark-dev
  python3 python3-matplotlib
  python3-torch           # the Python package; scripts/export_cell.py (TorchScript cells)
  python3-dev pybind11-dev  # the Python package's extension (vlrnn._C)
  python3-pytest          # the Python package's tests
  git                     # provenance in results (git sha, clean tree); tests that check it
  zlib1g-dev              # reads the gzip-compressed IDX files of Fashion-MNIST
  dataset-fashion-mnist   # the Fashion-MNIST train task (/usr/share/datasets/fashion-mnist)
  clang libclang-rt-14-dev  # the fuzz targets (tests/fuzz/): clang, libFuzzer, sanitizers
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "vlrnn: installing ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
