#!/usr/bin/env bash
# Benchmarks lstm_block (experiments/bench_lstm_block.cpp) against LibTorch's LSTM and an
# LSTMCell loop: forward + backward of one block of T = 256 steps, float32, F = H, over
# H in {256, 512, 1024, 2048} x B in {8, 32, 128}. Saves Google Benchmark's JSON and meta.json,
# converts them into the shared record schema (results.jsonl, results.csv:
# scripts/bench_to_records.py, which prints the table) and draws the figures (scripts/plot.py).
#
#   scripts/bench_lstm_block.sh [OUT_DIR]
#
# OUT_DIR defaults to results/cpu-lstm-block. Two passes, to keep the run short on 2 cores:
#   1. H = 256, 512, 1024 at every B: 3 repetitions of every implementation (lstm_block saving
#      gates, saving pre-activations, nn::LSTM, LSTMCell loop);
#   2. H = 2048 at every B (one point up to ~1 min): 1 repetition, without the pre-activation
#      mode (measured at the smaller sizes) and without the LSTMCell loop at B = 128.
# Within a pass the repetitions of all implementations run in a random order (so a burst of
# load from other processes does not land on one of them). Threads: one LibTorch intra-op
# thread (VLRNN_TORCH_THREADS overrides), OpenBLAS's default; both are recorded.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/cpu-lstm-block}
mkdir -p "$out"

cmake --build build --target bench_lstm_block >/dev/null

common=(--benchmark_min_time=0.01 --benchmark_enable_random_interleaving=true
        --benchmark_out_format=json)
cmd1=(build/bench_lstm_block '--benchmark_filter=/H:(256|512|1024)/' --benchmark_repetitions=3
      "${common[@]}" "--benchmark_out=$out/bench_lstm_block.json")
cmd2=(build/bench_lstm_block '--benchmark_filter=^BM_(LstmBlock/gates|TorchLstm)/H:2048/|^BM_TorchLstmCellLoop/H:2048/B:(8|32)/'
      --benchmark_repetitions=1 "${common[@]}" "--benchmark_out=$out/bench_lstm_block_h2048.json")
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
"${cmd1[@]}"
"${cmd2[@]}"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

blas=$(readlink -f /etc/alternatives/libblas.so.3-x86_64-linux-gnu 2>/dev/null || echo unknown)
torch_version=$(grep -A1 '#define TORCH_VERSION ' /usr/include/torch/csrc/api/include/torch/version.h \
                  2>/dev/null | grep -o '"[0-9.]*"' | tr -d '"' || true)
torch_threads=$(python3 -c "import json; print(json.load(open('$out/bench_lstm_block.json'))['context'].get('torch_threads', ''))")

META_COMMAND="scripts/bench_lstm_block.sh $out" META_BENCHMARK_COMMAND="${cmd1[*]} && ${cmd2[*]}" \
META_BLAS="$blas" META_TORCH="$torch_version" META_LOAD_BEFORE="$load_before" \
META_LOAD_AFTER="$load_after" META_JSON="bench_lstm_block.json bench_lstm_block_h2048.json" \
META_CLOCK=real META_EXTRA="{\"torch_threads\": \"$torch_threads\"}" \
python3 scripts/bench_meta.py "$out/meta.json"
python3 scripts/bench_to_records.py "$out"
python3 scripts/plot.py "$out"  # re-runs itself under /usr/bin/python3 when matplotlib is there only
