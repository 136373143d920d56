#!/usr/bin/env bash
# A model written in Python, scripted and saved by scripts/export_cell.py, loaded by the
# stock `vlrnn` tool: `verify --model-file` passes every exact method, `compare
# --model-file` measures it, a sweep config's "model_file" runs it, and modules with the
# wrong signature fail on load with an error naming what was expected.
# Skips (exit 77) when Python's torch is not importable.
# Usage: test_model_file.sh path/to/vlrnn
set -euo pipefail
vlrnn=${1:?usage: test_model_file.sh path/to/vlrnn}
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
source "$source_dir/tests/torch_python.sh"  # sets python, or skips (exit 77)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# Every module the test loads, the broken ones (below) among them, in one Python process.
export_each export_cell cell.pt "lstm.pt --stock lstm --layers 2" \
  "broken_arity.pt --broken arity" "broken_state.pt --broken state" \
  "broken_shape.pt --broken shape" "broken_lengths.pt --broken lengths" \
  "broken_batch_first.pt --broken batch_first" \
  "broken_bidirectional.pt --stock gru --bidirectional" > exports.log
head -1 exports.log

echo "== vlrnn verify --model-file cell.pt"
"$vlrnn" verify --model-file cell.pt --failures-only | tee verify.txt
grep -qE '^verify: [1-9][0-9]* passed, 0 failed' verify.txt

echo "== a stock torch.nn.LSTM (2 layers, batch_first=True), scripted as it is"
"$vlrnn" verify --model-file lstm.pt --failures-only | tee verify_lstm.txt
grep -qE '^verify: [1-9][0-9]* passed, 0 failed' verify_lstm.txt

echo "== vlrnn compare --model-file cell.pt"
# --check: exit 1 unless every method's gradients equal full's within verify's tolerance.
"$vlrnn" compare --model-file cell.pt --T 128 --batch 4 --methods full,vlrnn,checkpoint \
  --repeats 2 --warmup 0 --quiet --check --json compare.json --allow-dirty
"$python" - compare.json <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
assert out["meta"]["problem"]["input"] == 8, out["meta"]["problem"]  # the file's F, not --input's
print("compare: the model file's own F")
PY

echo "== vlrnn sweep with \"model_file\""
cat > sweep.json <<'JSON'
{"name": "model_file", "model_file": "cell.pt", "methods": ["full", "vlrnn"], "T": [32],
 "batch": [2], "block_length": [8], "repeats": 1, "warmup": 0, "gradient_error": true}
JSON
"$vlrnn" sweep sweep.json --out sweep_out --allow-dirty
grep -q '"model":"cell.pt"' sweep_out/results.jsonl

echo "== modules with the wrong signature"
failures=0
check_broken() {  # name (broken_NAME.pt, exported above), what the error must mention
  local name=$1 expected=$2
  local out rc=0
  out=$("$vlrnn" verify --model-file "broken_$name.pt" 2>&1) || rc=$?
  # One error line: no C++ frames, no TorchScript traceback.
  if ((rc != 2)) || ! grep -qF -- "$expected" <<<"$out" ||
     grep -qE 'frame #|terminate called|Traceback' <<<"$out"; then
    echo "FAIL broken $name (rc=$rc): expected exit 2 and an error mentioning '$expected'"
    sed 's/^/    /' <<<"$out" | head -10
    failures=$((failures + 1))
  else
    echo "ok   broken $name: $(grep -m1 'error' <<<"$out")"
  fi
}
check_broken arity "3 arguments"
check_broken state "expected Tuple[Tensor, ...]"
check_broken shape "expected z of shape [T, B, H]"
check_broken lengths "honour lengths"
check_broken batch_first "forward(x [3, 2, 8], state, lengths [3, 1]) raised an error in the load-time probe (expected x laid out [T, B, F]"
check_broken bidirectional "bidirectional=True is not supported"
exit $((failures > 0))
