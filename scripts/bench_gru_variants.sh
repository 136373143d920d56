#!/usr/bin/env bash
# Benchmarks the GRU variants (experiments/bench_gru_variants.cpp) against LibTorch's GRU and a
# GRUCell loop, saves Google Benchmark's JSON with meta.json, converts it into the shared record
# schema (results.jsonl, results.csv: scripts/bench_to_records.py) and draws the figures
# (scripts/plot.py).
#
#   scripts/bench_gru_variants.sh [OUT_DIR] [FILTER] [CLOCK]
#   OPENBLAS_NUM_THREADS=1 scripts/bench_gru_variants.sh results/cpu-gru-variants/one-thread '' cpu
#
# OUT_DIR defaults to results/cpu-gru-variants; FILTER is a --benchmark_filter regex (default:
# the feasible part of the grid on a 2-core CPU: H = 512 and 1024 at B = 32/64/128, H = 2048
# at B = 32). Each point: 3 repetitions of one forward + backward of T = 256 steps, run in a
# random order across implementations (so a burst of load from other processes does not land
# on one of them); the plots use the median, with the spread and the ratios' intervals.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/cpu-gru-variants}
filter=${2:-'/H:(512|1024)/B:[0-9]+/|/H:2048/B:32/'}
clock=${3:-real}  # what the figures compare: real (wall-clock) or cpu (main-thread CPU) time
mkdir -p "$out/figures"

cmake --build build --target bench_gru_variants >/dev/null

json="$out/bench_gru_variants.json"
cmd=(build/bench_gru_variants "--benchmark_filter=$filter" --benchmark_repetitions=3
     --benchmark_min_time=0.01 --benchmark_enable_random_interleaving=true
     "--benchmark_out=$json" --benchmark_out_format=json)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
"${cmd[@]}"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

blas=$(readlink -f /etc/alternatives/libblas.so.3-x86_64-linux-gnu 2>/dev/null || echo unknown)
torch_version=$(grep -A1 '#define TORCH_VERSION ' /usr/include/torch/csrc/api/include/torch/version.h \
                  2>/dev/null | grep -o '"[0-9.]*"' | tr -d '"' || true)

META_COMMAND="scripts/bench_gru_variants.sh $out '$filter' $clock" META_BENCHMARK_COMMAND="${cmd[*]}" \
META_BLAS="$blas" META_TORCH="$torch_version" META_LOAD_BEFORE="$load_before" \
META_LOAD_AFTER="$load_after" META_JSON="$(basename "$json")" META_CLOCK="$clock" \
python3 scripts/bench_meta.py "$out/meta.json"
python3 scripts/bench_to_records.py "$out"
python3 scripts/plot.py "$out"  # re-runs itself under /usr/bin/python3 when matplotlib is there only
