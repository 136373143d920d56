#!/usr/bin/env bash
# Installs, from Debian's packages, whatever of VLRNN's dependencies this machine lacks.
# Safe to run again: it does nothing when everything is present.
set -euo pipefail

packages=(
  g++ cmake ninja-build
  libtorch-dev            # LibTorch 1.13 (CPU)
  libgloo-dev             # c10d gloo headers: vlrnn train on several ranks (distributed/)
  libopenblas0-pthread    # fast BLAS: the default reference BLAS is ~30x slower
  libfmt-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev libbenchmark-dev
  python3 python3-matplotlib
  python3-torch           # the Python package; scripts/export_cell.py (TorchScript cells)
  python3-dev pybind11-dev  # the Python package's extension (vlrnn._C)
  python3-pytest          # the Python package's tests
  python3-venv python3-pip python3-setuptools python3-wheel  # pip install . (a venv's)
  git                     # provenance in results (git sha, clean tree); tests that check it
  debootstrap             # scripts/test_debian13.sh: the Debian 13 chroot (CI runs it)
  zlib1g-dev              # reads the gzip-compressed IDX files of Fashion-MNIST
  dataset-fashion-mnist   # the Fashion-MNIST train task (/usr/share/datasets/fashion-mnist)
  clang                   # the fuzz targets (tests/fuzz/): clang, libFuzzer, sanitizers ...
  "libclang-rt-dev|libclang-rt-14-dev"  # ... with clang's runtime: Debian 13's name | 12's
)
# An entry "a|b" is whichever of its names this release has, the first one preferred.

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing=()
for entry in "${packages[@]}"; do
  IFS='|' read -r -a names <<< "$entry"
  found=""
  for name in "${names[@]}"; do installed "$name" && found=$name && break; done
  [[ -n $found ]] || missing+=("$entry")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
apt_get="$(dirname "$0")/apt_get.sh"  # apt-get, waiting for another apt's lock
$sudo "$apt_get" update -q
# Each missing entry as the first of its names that this release's package lists know.
chosen=()
for entry in "${missing[@]}"; do
  IFS='|' read -r -a names <<< "$entry"
  pick=""
  for name in "${names[@]}"; do
    if apt-cache show "$name" > /dev/null 2>&1; then pick=$name; break; fi
  done
  if [[ -z $pick ]]; then
    echo "vlrnn: none of the packages '${entry//|/, }' exists in this release's lists" >&2
    exit 1
  fi
  chosen+=("$pick")
done
missing=("${chosen[@]}")
echo "vlrnn: installing ${missing[*]}"
$sudo "$apt_get" install -y -q --no-install-recommends "${missing[@]}"
