#!/usr/bin/env bash
# The GPU benchmarks, the second of the device check's two commands (after
# scripts/device/check.sh, on the same warm machine: it reuses check.sh's build in
# build-device/build). Everything it finds goes under $OUT, at most 8 files:
#   1. compare_T16384.json: `vlrnn compare --device cuda` at the GPU target's shape (LSTM
#      I = 256, H = 1024, B = 64, T = 16384, float32, LibTorch's LSTM, so cuDNN): full BPTT,
#      VLRNN at the default block, the planner at 10 % of full's peak and sqrt(T)
#      checkpointing, interleaved, each with its time and its peak from the caching allocator;
#   2. python/results.jsonl, python/meta.json: scripts/bench_python.py's gpu experiment at
#      the same shape, the Python peers side by side (nn.LSTM + loss.backward(),
#      torch.utils.checkpoint over sqrt(T) segments, the original VLRNN's algorithm,
#      vlrnn.VLRNN on nn.LSTM as is, and its planner at 10 %);
#   3. compare_long.json: VLRNN alone at T = 1,048,576 (full BPTT does not fit there), one
#      timed iteration, for the time per step against T = 16384's;
#   4. summary.md: each step's exit status and headline; steps.log: their output.
# Each step runs under a time limit, the whole within VLRNN_BENCH_SECONDS (default 280) so
# that it fits one 5-minute command: 1 and 2 at most 100 s each, 3 the rest; a step cut
# short says so in summary.md; run bench.sh again with VLRNN_SKIP_PASSED=1, which skips 1 and
# 2 if they passed (NOTE [ A rerun runs what is left ] in steps.sh): 3 gets the whole budget.
# Without a GPU it runs the same steps on the CPU at a small shape (T = 64 and 512, H = 32),
# so that it works the first time a GPU is there:
#   VLRNN_TRIXIE_COMMAND="VLRNN_CHECK_SECONDS=3600 OUT=/tmp/out scripts/device/check.sh && OUT=/tmp/out scripts/device/bench.sh" \
#     scripts/test_debian13.sh
# From the device tool, after check.sh: run(command="VLRNN_COMMIT=<sha> scripts/device/bench.sh",
# timeout_s=300), then give_back.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
total=${VLRNN_BENCH_SECONDS:-280}  # inside the tool's timeout_s=300
source scripts/device/steps.sh
if [[ $device == cuda ]]; then
  shape=(--input 256 --hidden 1024 --batch 64) short=16384 long=1048576 gpu_shape=256,1024,64,16384
else
  shape=(--input 16 --hidden 32 --batch 4) short=64 long=512 gpu_shape=16,32,4,64
fi

# --allow-dirty: the machine's copy of the tree is no git checkout; the commit is in
# summary.md (VLRNN_COMMIT), and a committed result folder is made from a clean one.
compare=("$build/vlrnn" compare --device "$device" --model lstm "${shape[@]}" --dtype float32
         --allow-dirty --quiet)

step compare_T16384 100 "${compare[@]}" --T "$short" --repeats 3 --warmup 1 \
  --methods full,vlrnn,planner:percent=10,checkpoint --json "$out/compare_T16384.json"
step python_peers 100 env PYTHONPATH="$build/python" "$python" scripts/bench_python.py \
  --experiments gpu --device "$device" --gpu-shape "${gpu_shape}" --repeats 3 --warmup 1 \
  --out "$out/python"
step compare_long "$total" "${compare[@]}" --T "$long" --repeats 1 --warmup 0 --no-error \
  --methods vlrnn --json "$out/compare_long.json"

finish "Device benchmarks"
