#!/usr/bin/env bash
# The prepared device check: one command on the GPU machine (PyTorch with CUDA, 16 cores,
# no package registry), about 4 minutes, everything it finds written under $OUT:
#   1. facts.json: torch, CUDA, cuDNN, the GPU (name, memory, driver), cores;
#   2. builds the library, the `vlrnn` tool and the Python extension against that torch
#      with every core (no tests or benchmarks: GoogleTest and Benchmark are not there),
#      fmt / nlohmann-json / CLI11 from build-device/include (scripts/device/fetch_headers.sh,
#      run here first; carried), into build-device/build;
#   3. `vlrnn verify --random 60 --seed 1` (CI's share of the random set; CPU);
#   4. the Python suite (tests/python) against that torch, JUnit XML and its summary;
#   5. scripts/device/cuda_probe.py: each gradient method on CUDA modules against PlainRNN
#      in float64, dropout and variable lengths included (on the CPU where no GPU is);
#   6. summary.md: each step's exit status and its headline.
# Each step runs even when one before it failed; the exit status is 1 if any failed.
# Without a GPU it runs the same on the CPU: in the Debian 13 chroot,
#   VLRNN_TRIXIE_COMMAND="OUT=/tmp/device-out scripts/device/check.sh" scripts/test_debian13.sh
# From the device tool: run(command="scripts/device/check.sh", carry=["build-device/include"],
# timeout_s=420), then give_back.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-build-device/out}
mkdir -p "$out"
python=${VLRNN_DEVICE_PYTHON:-python3}
command -v "$python" > /dev/null || python=/usr/bin/python3
build=build-device/build
status=()  # "step rc seconds"

step() {
  local name=$1 start=$SECONDS rc
  shift
  echo "== $name"
  "$@" > "$out/$name.log" 2>&1
  rc=$?
  tail -n 3 "$out/$name.log"
  status+=("$name $rc $((SECONDS - start))")
}

facts() {
  "$python" - "$out/facts.json" <<'PY'
import json, os, subprocess, sys
import torch
facts = {"torch": torch.__version__, "cuda_available": torch.cuda.is_available(),
         "cuda": torch.version.cuda, "cores": os.cpu_count()}
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    facts.update(gpu=p.name, gpu_memory_bytes=p.total_memory,
                 cudnn=torch.backends.cudnn.version())
    try:
        facts["driver"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        facts["driver"] = "unknown"
json.dump(facts, open(sys.argv[1], "w"), indent=2)
print(json.dumps(facts))
PY
}

configure_and_build() {
  local prefix headers=() generator=()
  prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
  if [[ -d build-device/include/fmt ]]; then
    headers=(-DVLRNN_FMT_INCLUDE="$PWD/build-device/include" -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON
             -DVLRNN_JSON_INCLUDE="$PWD/build-device/include"
             -DVLRNN_CLI11_INCLUDE="$PWD/build-device/include")
  fi
  command -v ninja > /dev/null && generator=(-G Ninja)
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" -DVLRNN_PYTHON="$(command -v "$python")" \
    -DVLRNN_BUILD_TESTS=OFF -DVLRNN_BUILD_BENCHMARKS=OFF -DVLRNN_BUILD_EXAMPLES=OFF \
    "${headers[@]}" && cmake --build "$build" --parallel "$(nproc)"
}

python_suite() {
  PYTHONPATH=$PWD/$build/python "$python" -m pytest -q -p no:cacheprovider \
    --junitxml="$out/pytest.xml" tests/python
}

step facts facts
step build configure_and_build
step verify "$build/vlrnn" verify --random 60 --seed 1 --json "$out/verify.json" --failures-only
step pytest python_suite
step cuda_probe env PYTHONPATH="$PWD/$build/python" "$python" scripts/device/cuda_probe.py \
  --out "$out/cuda_probe.json"

failed=0
{
  echo "# Device check, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null)"
  echo
  echo "| step | exit | seconds | last line |"
  echo "|---|---|---|---|"
  for entry in "${status[@]}"; do
    read -r name rc seconds <<< "$entry"
    ((rc != 0)) && failed=1
    echo "| $name | $rc | $seconds | $(tail -n 1 "$out/$name.log" | tr '|' '/') |"
  done
} > "$out/summary.md"
cat "$out/summary.md"
exit $failed
