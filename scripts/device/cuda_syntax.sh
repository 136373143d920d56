#!/usr/bin/env bash
# Compiles, here, the library's CUDA-only lines (the files with `#ifdef VLRNN_WITH_CUDA`)
# against CUDA's headers and the LibTorch headers of the python3 given, without a GPU or a
# CUDA LibTorch: a name or signature they get wrong then fails here, in seconds, and not in
# the first minutes of a GPU session, on its build.
#   scripts/device/cuda_syntax.sh [PYTHON]     (default /usr/bin/python3; Debian 12 or 13)
# CUDA's headers come from Debian 13's packages nvidia-cuda-dev (in non-free; a 0.9 GB
# download, once) and libcu++-dev, unpacked into build-device/cuda (ignored by git). A CPU
# LibTorch lacks the one header its CUDA build generates (c10/cuda/impl/cuda_cmake_macros.h);
# a stand-in that declares the shared library is written beside them.
# Exit status: 0 when every file compiles, 1 when one does not, 2 when the headers could not
# be fetched. Run it before a GPU session (docs/platforms.md, "The GPU machine").
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
python=${1:-/usr/bin/python3}
cuda=$PWD/build-device/cuda

fetch_cuda_headers() {
  local apt_dir="$cuda/apt" options
  mkdir -p "$apt_dir/lists/partial" "$cuda/debs"
  # A source list of our own: the machine's apt configuration stays as it is.
  echo "deb http://deb.debian.org/debian trixie main non-free" > "$apt_dir/sources.list"
  options=(-o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
           -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache::pkgcache=
           -o Dir::Cache::srcpkgcache= -o APT::Sandbox::User=root)
  apt-get "${options[@]}" update -q > /dev/null &&
    (cd "$cuda/debs" && apt-get "${options[@]}" download nvidia-cuda-dev libcu++-dev > /dev/null) ||
    return 1
  for deb in "$cuda"/debs/*.deb; do
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$cuda" --wildcards './usr/include/*' || return 1
  done
  rm -rf "$cuda/debs" "$apt_dir"
}

if [[ ! -f $cuda/usr/include/cuda_runtime_api.h ]]; then
  echo "fetching CUDA's headers into $cuda (once)"
  fetch_cuda_headers || { echo "could not fetch nvidia-cuda-dev / libcu++-dev" >&2; exit 2; }
fi
macros=$cuda/stand-in/c10/cuda/impl/cuda_cmake_macros.h
mkdir -p "$(dirname "$macros")"
printf '#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n' > "$macros"

mapfile -t torch_includes < <("$python" -c \
  'from torch.utils import cpp_extension; print("\n".join(cpp_extension.include_paths()))' 2> /dev/null)
[[ ${#torch_includes[@]} -gt 0 ]] || { echo "no torch in $python" >&2; exit 2; }
flags=(-std=c++17 -fsyntax-only -DVLRNN_WITH_CUDA=1 -DFMT_HEADER_ONLY)
for folder in vlrnn baselines registry verify; do flags+=(-I "$folder/include"); done
for include in "${torch_includes[@]}" "$cuda/stand-in" "$cuda/usr/include"; do
  flags+=(-isystem "$include")
done

mapfile -t files < <(git grep -l -E '^#if(n?def| defined\()? *\(?VLRNN_WITH_CUDA' -- '*.cpp')
[[ ${#files[@]} -gt 0 ]] || { echo "no file has CUDA-only lines" >&2; exit 1; }
# The build compiles them 16 to a unit with other files (NOTE [ Unity builds ]), where a name
# of theirs may collide with another's: the units of this checkout's build/ that hold them
# are compiled too (those its compile_commands.json names: CMake leaves old units behind).
mapfile -t units < <(grep -o '"file": "[^"]*/Unity/[^"]*"' build/compile_commands.json 2> /dev/null |
                       cut -d '"' -f 4 | xargs -r grep -l -F -f <(printf '%s\n' "${files[@]/#/$PWD/}"))
status=0
for file in "${files[@]}" "${units[@]}"; do
  if g++ "${flags[@]}" "$file" 2> "$cuda/errors.txt"; then
    echo "ok      $file"
  else
    echo "FAILED  $file"
    grep -m 20 -E "error" "$cuda/errors.txt"
    status=1
  fi
done
echo "CUDA-only lines against torch $("$python" -c 'import torch; print(torch.__version__)'):" \
     "${#files[@]} files and ${#units[@]} of the build's units, $([[ $status == 0 ]] && echo "all compile" || echo "some fail")"
exit $status
