#!/usr/bin/env bash
# Benchmarks the linear recurrences' in-block scan (vlrnn/cells/linear_scan.h) on a one-layer
# minGRU, float32, H = 256, B = 32, T = 4096, F = H:
#   1. build/bench_linear_scan: the scan against the plain step loop, forward (no grad) and
#      forward + backward of one block of all T steps; repetitions randomly interleaved;
#   2. build/vlrnn compare: VLRNN (K = ceil(sqrt(T)) = 64, K = 32, and K = 256) against full
#      BPTT on the scan form, taking turns in every round (paired ratios), with the
#      iteration's exact peak memory;
#   3. VLRNN at T = 65,536 (K = 64, and K = 256 = ceil(sqrt(T))): with 2. at the same K, its
#      memory for 16x the steps; without full BPTT and without the gradient check: full
#      BPTT's tape grows with T (1.0 GiB at T = 4096, so about 16 GiB here) and does not fit a
#      24 GiB machine, which is the point of the method.
#   4. build/bench_linear_scan again, into OUT_DIR/kept-memory, with glibc told to keep what is
#      freed (GLIBC_TUNABLES below, VLRNN_BENCH_KEEP_FREED=1: no resident-memory probe, which
#      would hand it back): each repetition reuses pages touched before, as a training loop
#      with a caching allocator does, instead of paying the kernel to map and zero 128 MiB
#      per buffer (NOTE [ Fresh pages cost time ] in experiments/bench_linear_scan.cpp).
# Saves Google Benchmark's JSON, compare's JSON and text, and meta.json; converts the benchmark
# into the shared record schema (scripts/bench_to_records.py, which prints the table) and draws
# the figures (scripts/plot.py: the benchmark's, and each compare file's into FILE-figures/).
#
#   scripts/bench_linear_scan.sh [OUT_DIR] [REPEATS]
#
# OUT_DIR defaults to results/cpu-linear-scan, REPEATS (of both parts) to 5. Threads: one
# LibTorch intra-op thread, OpenBLAS's default; both are recorded.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/cpu-linear-scan}
repeats=${2:-5}
mkdir -p "$out"

cmake --build build --target bench_linear_scan vlrnn >/dev/null

bench=(build/bench_linear_scan "--benchmark_repetitions=$repeats" --benchmark_min_time=0.01
       --benchmark_enable_random_interleaving=true --benchmark_out_format=json)
cmd1=("${bench[@]}" "--benchmark_out=$out/bench_linear_scan.json")
cmd2=(build/vlrnn compare --model mingru --input 256 --hidden 256 --batch 32 --T 4096
      --methods full,vlrnn,vlrnn:block_length=32,vlrnn:block_length=256 --repeats "$repeats" --warmup 1 --quiet
      --json "$out/compare_t4096.json")
cmd3=(build/vlrnn compare --model mingru --input 256 --hidden 256 --batch 32 --T 65536
      --methods vlrnn:block_length=64,vlrnn --no-error --repeats 2 --warmup 0 --quiet
      --json "$out/compare_t65536.json")
kept="$out/kept-memory"
mkdir -p "$kept"
# mmap_threshold above every buffer here: glibc serves them from its heap, not fresh mappings;
# trim_threshold: it does not hand the heap's free top back to the kernel.
kept_env=(GLIBC_TUNABLES=glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967296
          VLRNN_BENCH_KEEP_FREED=1)
cmd4=("${bench[@]}" "--benchmark_out=$kept/bench_linear_scan.json")
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
"${cmd1[@]}"
"${cmd2[@]}" | tee "$out/compare_t4096.txt"
"${cmd3[@]}" | tee "$out/compare_t65536.txt"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
env "${kept_env[@]}" "${cmd4[@]}"
load_after_kept=$(cut -d' ' -f1-3 /proc/loadavg)

blas=$(readlink -f /etc/alternatives/libblas.so.3-x86_64-linux-gnu 2>/dev/null || echo unknown)
torch_version=$(grep -A1 '#define TORCH_VERSION ' /usr/include/torch/csrc/api/include/torch/version.h \
                  2>/dev/null | grep -o '"[0-9.]*"' | tr -d '"' || true)
torch_threads=$(python3 -c "import json; print(json.load(open('$out/bench_linear_scan.json'))['context'].get('torch_threads', ''))")

# meta.json of one benchmark folder: DIR, the benchmark command, the load before and after,
# and the fields META_EXTRA adds beside torch_threads.
write_meta() {
  META_COMMAND="scripts/bench_linear_scan.sh $out $repeats" META_BENCHMARK_COMMAND="$2" \
  META_BLAS="$blas" META_TORCH="$torch_version" META_LOAD_BEFORE="$3" META_LOAD_AFTER="$4" \
  META_JSON="bench_linear_scan.json" META_STEPS=4096 META_CLOCK=real \
  META_EXTRA="{\"torch_threads\": \"$torch_threads\", $5}" \
  python3 scripts/bench_meta.py "$1/meta.json"
}
write_meta "$out" "${cmd1[*]} && ${cmd2[*]} && ${cmd3[*]}" "$load_before" "$load_after" \
  '"compare_json": "compare_t4096.json", "compare_t65536_json": "compare_t65536.json"'
write_meta "$kept" "${kept_env[*]} ${cmd4[*]}" "$load_after" "$load_after_kept" \
  "\"allocator\": \"glibc keeping freed memory: ${kept_env[0]}\""
for dir in "$out" "$kept"; do
  python3 scripts/bench_to_records.py "$dir"
  python3 scripts/plot.py "$dir"  # re-runs itself under /usr/bin/python3 when matplotlib is there only
done
python3 scripts/plot.py "$out/compare_t4096.json"
python3 scripts/plot.py "$out/compare_t65536.json"
