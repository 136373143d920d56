#!/usr/bin/env bash
# The prepared device check, the first of two commands on the GPU machine (PyTorch with
# CUDA, 16 cores, no package registry; scripts/device/bench.sh is the second), at most 5
# minutes. Everything it finds goes under $OUT, at most 8 files (the device tool returns no
# more):
#   1. facts.json: torch, CUDA, cuDNN, the GPU (name, memory, driver), cores;
#   2. builds the library, the `vlrnn` tool and the Python extension against that torch
#      with every core (no tests or benchmarks: GoogleTest and Benchmark are not there),
#      fmt / nlohmann-json / CLI11 from build-device/include (scripts/device/fetch_headers.sh,
#      run here first; carried), into build-device/build;
#   3. verify_device.json: `vlrnn verify --random 60 --seed 1 --device cuda` (CI's share of
#      the random set: every exact method; float64 and float32, dropout, lengths and padded
#      tails among them; the whole matrix, 6056 cases, takes 4.5 min on a CPU);
#   4. cuda_probe.json: scripts/device/cuda_probe.py, each gradient method on CUDA modules
#      against PlainRNN in float64, dropout and variable lengths included, and bfloat16's
#      and float16's (autocast with a GradScaler) gradient error beside full BPTT's own;
#   5. pytest.xml: the Python suite (tests/python, but its torch.compile file) against that torch;
#   6. pip_install (steps.log): scripts/test_pip_install.sh, `pip install
#      --no-build-isolation .` into a fresh venv over the machine's torch (reusing step 2's
#      build), then `import vlrnn` and the Python examples from the installed package;
#   7. verify.json: the same 60 configurations on the CPU, each row paired with one of 3's;
#   8. summary.md: each step's exit status, seconds and last line; steps.log: their output.
# Each step runs even when one before it failed, under a time limit, all within
# VLRNN_CHECK_SECONDS (290); the exit status is 1 if any failed. A step the budget cut
# short says so in summary.md: run it again on the warm machine, where the build is done,
# with VLRNN_SKIP_PASSED=1 to skip the steps that passed (NOTE [ A rerun runs what is left ]
# in steps.sh).
# Without a GPU it runs the same on the CPU (step 3 then verifies on the CPU): in the
# Debian 13 chroot,
#   VLRNN_TRIXIE_COMMAND="VLRNN_CHECK_SECONDS=3600 OUT=/tmp/out scripts/device/check.sh" scripts/test_debian13.sh
# From the device tool: run(command="VLRNN_COMMIT=<sha> scripts/device/check.sh",
# carry=["build-device/include"], timeout_s=310); then bench.sh, then give_back.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
total=${VLRNN_CHECK_SECONDS:-290}  # inside the tool's timeout_s=310
source scripts/device/steps.sh

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
  local prefix cuda headers=() generator=()
  prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
  # CMake finds a CUDA LibTorch by itself; said here too, as the check depends on it.
  cuda=$("$python" -c 'import torch; print("ON" if torch.version.cuda else "OFF")')
  if [[ -d build-device/include/fmt ]]; then
    headers=(-DVLRNN_FMT_INCLUDE="$PWD/build-device/include" -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON
             -DVLRNN_JSON_INCLUDE="$PWD/build-device/include"
             -DVLRNN_CLI11_INCLUDE="$PWD/build-device/include")
  fi
  command -v ninja > /dev/null && generator=(-G Ninja)
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" -DVLRNN_PYTHON="$(command -v "$python")" \
    -DVLRNN_WITH_CUDA="$cuda" \
    -DVLRNN_BUILD_TESTS=OFF -DVLRNN_BUILD_BENCHMARKS=OFF -DVLRNN_BUILD_EXAMPLES=OFF \
    "${headers[@]}" && cmake --build "$build" --parallel "$(nproc)"
}

python_suite() {
  # Without test_compiled_modules.py: CPU modules only, half a minute of inductor compiling
  # that CI's Debian 13 run covers, and the step's 150 s are the CUDA cases'.
  PYTHONPATH=$build/python "$python" -m pytest -q -p no:cacheprovider \
    --ignore=tests/python/test_compiled_modules.py --junitxml="$out/pytest.xml" tests/python
}

export -f facts configure_and_build python_suite
# The GPU's own steps first: a step cut short by the budget is then the CPU one CI runs too.
step facts 30 facts
step build 280 configure_and_build  # on a fresh machine the build may take it all
step verify_device 90 "$build/vlrnn" verify --random 60 --seed 1 --device "$device" \
  --json "$out/verify_device.json" --failures-only
step cuda_probe 60 env PYTHONPATH="$build/python" "$python" scripts/device/cuda_probe.py \
  --out "$out/cuda_probe.json"
step pytest 150 python_suite
step pip_install 60 scripts/test_pip_install.sh . "$build" "$python"
step verify 60 "$build/vlrnn" verify --random 60 --seed 1 --json "$out/verify.json" --failures-only

finish "Device check"
