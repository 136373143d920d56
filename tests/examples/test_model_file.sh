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
# Debian's python3-torch lives in /usr/bin/python3's packages (a pyenv python3 lacks it).
python=${VLRNN_PYTHON:-}
for candidate in /usr/bin/python3 python3; do
  if [[ -z $python ]] && "$candidate" -c 'import torch' 2>/dev/null; then python=$candidate; fi
done
if [[ -z $python ]]; then
  echo "SKIP: no python3 can import torch (install python3-torch: scripts/install_deps.sh)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

"$python" "$source_dir/scripts/export_cell.py" cell.pt

echo "== vlrnn verify --model-file cell.pt"
"$vlrnn" verify --model-file cell.pt --failures-only | tee verify.txt
grep -qE '^verify: [1-9][0-9]* passed, 0 failed' verify.txt

echo "== vlrnn compare --model-file cell.pt"
"$vlrnn" compare --model-file cell.pt --T 128 --batch 4 --methods full,vlrnn,checkpoint \
  --repeats 2 --warmup 0 --quiet --json compare.json --allow-dirty
"$python" - compare.json <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
runs = out["runs"]
assert [r["status"] for r in runs] == ["ok"] * 3, runs
for r in runs:
    err = (r.get("error_vs_full") or {}).get("max_rel", 0.0)
    assert err <= 1e-5, (r["method"], err)
assert out["problem"]["input"] == 8, out["problem"]  # the file's F, not --input's
print("compare: 3 methods ok, gradients equal to full's")
PY

echo "== vlrnn sweep with \"model_file\""
cat > sweep.json <<'JSON'
{"name": "model_file", "model_file": "cell.pt", "methods": ["full", "vlrnn"], "T": [32],
 "batch": [2], "block": [8], "repeats": 1, "warmup": 0, "gradient_error": true}
JSON
"$vlrnn" sweep sweep.json --out sweep_out --allow-dirty
grep -q '"model":"cell.pt"' sweep_out/results.jsonl

echo "== modules with the wrong signature"
failures=0
check_broken() {  # kind, what the error must mention
  "$python" "$source_dir/scripts/export_cell.py" "broken_$1.pt" --broken "$1" > /dev/null
  local out rc=0
  out=$("$vlrnn" verify --model-file "broken_$1.pt" 2>&1) || rc=$?
  if ((rc == 0 || rc >= 124)) || ! grep -qF -- "$2" <<<"$out" || grep -qE 'frame #|terminate called' <<<"$out"; then
    echo "FAIL broken $1 (rc=$rc): expected an error mentioning '$2'"
    sed 's/^/    /' <<<"$out" | head -10
    failures=$((failures + 1))
  else
    echo "ok   broken $1: $(grep -m1 'error' <<<"$out")"
  fi
}
check_broken arity "3 arguments"
check_broken state "expected Tuple[Tensor, ...]"
check_broken shape "expected z of shape [T, B, H]"
check_broken lengths "honour lengths"
exit $((failures > 0))
