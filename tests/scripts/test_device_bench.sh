#!/usr/bin/env bash
# The GPU benchmarks' script (scripts/device/bench.sh) stays runnable at every commit: here it
# runs on the CPU at its small shape, with this build's `vlrnn`, and must write what the
# device tool brings back (at most 8 files, each step exit 0, a record per method); run again
# with VLRNN_SKIP_PASSED=1, it runs none of them.
# Usage: test_device_bench.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir=${1:?usage: test_device_bench.sh SOURCE_DIR BUILD_DIR}
build_dir=$(realpath "${2:?usage: test_device_bench.sh SOURCE_DIR BUILD_DIR}")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The CPU path: no GPU is asked for, whatever this machine's torch can see.
OUT=$out VLRNN_DEVICE_BUILD=$build_dir VLRNN_COMMIT=test CUDA_VISIBLE_DEVICES='' \
  "$source_dir/scripts/device/bench.sh"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
files=$(find "$out" -type f | wc -l)
((files <= 8)) || fail "$files files under \$OUT; the device tool returns 8"
grep -q '^# Device benchmarks on cpu, .*commit test$' "$out/summary.md" || fail "summary.md's header"
for step in compare_T16384 python_peers compare_long; do
  grep -qE "^\| $step \| 0 \|" "$out/summary.md" || fail "step $step did not exit 0"
done
python3 - "$out" <<'PY' || failures=$((failures + 1))
import json, sys
out = sys.argv[1]
for name, methods in (("compare_T16384", {"full", "vlrnn", "planner", "checkpoint"}),
                      ("compare_long", {"vlrnn"})):
    data = json.load(open(f"{out}/{name}.json"))
    runs = {r["method_name"]: r for r in data["records"]}
    missing = methods - set(runs)
    assert not missing, f"{name}: no record of {missing}"
    for method, r in runs.items():
        assert r["status"] == "ok", f"{name} {method}: {r['status']}"
        assert r["memory"]["iteration_peak_bytes"] > 0, f"{name} {method}: no peak"
    assert data["meta"]["devices"], f"{name}: meta.json names no device"
peers = {r["peer"]: r for r in map(json.loads, open(f"{out}/python/results.jsonl"))}
want = {"pytorch_full", "torch_checkpoint", "original_vlrnn", "vlrnn_nn_lstm_as_is",
        "vlrnn_planner_10"}
assert set(peers) == want, f"python peers: {sorted(peers)}"
for peer, r in peers.items():
    assert r["peak_bytes"] > 0 and len(r["time_s"]["samples_s"]) == 3, (peer, r)
print("compare and python records: ok")
PY
# The rerun asked for (NOTE [ A rerun runs what is left ]): every step passed above, so none
# runs again, and the summary says so.
again=$(mktemp -d)
OUT=$again VLRNN_DEVICE_BUILD=$build_dir VLRNN_COMMIT=test VLRNN_SKIP_PASSED=1 \
  CUDA_VISIBLE_DEVICES='' "$source_dir/scripts/device/bench.sh" > /dev/null \
  || fail "the rerun with VLRNN_SKIP_PASSED=1 failed"
for step in compare_T16384 python_peers compare_long; do
  grep -qE "^\| $step \| 0 \| [0-9]+ \| \(passed in an earlier call at test: not run again\)" \
    "$again/summary.md" || fail "the rerun ran $step again"
done
rm -rf "$again"
exit $((failures > 0))
