#!/usr/bin/env bash
# A head and loss written in Python (an MLP with its own categorical log-likelihood),
# scripted and saved by scripts/export_head.py, on a model written in Python
# (scripts/export_cell.py), in the stock `vlrnn` tool: `verify --model-file --head-file`
# passes every exact method, `compare` measures it, a sweep's "head_file" runs it, a train
# config with "model_file" and "head_file" trains, checkpoints, stops and resumes on the
# same trajectory, a plugin's kind trains with the head too, and heads with the wrong
# signature fail on load with an error naming what was expected.
# Skips (exit 77) when Python's torch is not importable.
# Usage: test_head_file.sh path/to/vlrnn [path/to/indrnn_plugin.so]
set -euo pipefail
vlrnn=$(realpath "${1:?usage: test_head_file.sh path/to/vlrnn [plugin.so]}")
plugin=${2:+$(realpath "$2")}
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
source "$source_dir/tests/torch_python.sh"  # sets python, or skips (exit 77)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# F = 6 and C = 4: the copy task's with an alphabet of 4 (below).
export_each export_cell "cell.pt --input 6 --hidden 16 --dropout 0.1"
# The head, and the broken heads of the last part, in one Python process.
export_each export_head "head.pt --input 16 --classes 4" "broken_arity.pt --broken arity" \
  "broken_reduced.pt --broken reduced" "broken_mixes.pt --broken mixes" \
  "broken_no-targets.pt --broken no-targets" > head_exports.log
head -1 head_exports.log

echo "== vlrnn verify --model-file cell.pt --head-file head.pt (float64: 1e-10)"
"$vlrnn" verify --model-file cell.pt --head-file head.pt --filter /f64/ --failures-only | tee verify.txt
grep -qE '^verify: [1-9][0-9]* passed, 0 failed' verify.txt

echo "== vlrnn compare --model-file cell.pt --head-file head.pt"
# --check: exit 1 unless every method's gradients equal full's within verify's tolerance.
"$vlrnn" compare --model-file cell.pt --head-file head.pt --T 64 --batch 4 \
  --methods full,vlrnn,checkpoint --repeats 1 --warmup 0 --quiet --check

echo "== vlrnn sweep with \"model_file\" and \"head_file\""
cat > sweep.json <<'JSON'
{"name": "head_file", "model_file": "cell.pt", "head_file": "head.pt", "methods": ["full", "vlrnn"],
 "T": [32], "batch": [2], "block_length": [8], "repeats": 1, "warmup": 0, "gradient_error": true}
JSON
"$vlrnn" sweep sweep.json --out sweep_out --allow-dirty
grep -q '"head":"head.pt"' sweep_out/results.jsonl

echo "== vlrnn train with \"model_file\" and \"head_file\": stop, resume"
cat > train.json <<'JSON'
{"name": "user_model", "task": {"kind": "copy", "delay": 10, "symbols": 2, "alphabet": 4, "min_length": 0.5},
 "model": {"model_file": "cell.pt"}, "head_file": "head.pt",
 "methods": ["full", "vlrnn:block_length=4"], "batch": 4, "optimizer_steps": 200,
 "optimizer": {"kind": "adam", "lr": 0.01, "clip": 1.0},
 "eval_every": 50, "eval_batches": 1, "checkpoint_every": 10, "dtype": "float64"}
JSON
losses_of() { "$python" - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1] + "/results.jsonl"):
    r = json.loads(line)
    if r["kind"] == "train_step":
        print(r["run"], r["step"], repr(r["loss"]), repr(r["grad_norm"]), r.get("eval_loss"))
PY
}
"$vlrnn" train train.json --out straight --allow-dirty > straight.log 2>&1 || { cat straight.log; exit 1; }
[[ $(grep -c '"kind":"train_step"' straight/results.jsonl) == 400 ]]
grep -q '"head":"head.pt"' straight/results.jsonl
ls straight/checkpoints/*.pt > /dev/null
# Every exact method follows full BPTT's trajectory with the user's loss (float64).
"$python" - straight <<'PY'
import json, sys
loss = {}
for line in open(sys.argv[1] + "/results.jsonl"):
    r = json.loads(line)
    if r["kind"] == "train_step":
        loss.setdefault(r["method"], []).append(r["loss"])
full, block = loss["full"], loss["vlrnn:block_length=4"]
worst = max(abs(a - b) / abs(b) for a, b in zip(block, full))
assert worst < 1e-10, worst
assert full[-1] < full[0], (full[0], full[-1])
print(f"train: vlrnn follows full BPTT within {worst:.1e} for 200 steps; loss {full[0]:.3f} -> {full[-1]:.3f}")
PY
"$vlrnn" train train.json --out stopped --allow-dirty > stopped.log 2>&1 &
pid=$!
for _ in $(seq 1 300); do
  [[ -n $(ls stopped/checkpoints 2>/dev/null) ]] && break
  sleep 0.1
done
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
((rc == 0 || rc == 130)) || { echo "FAIL: stopped run exited $rc"; cat stopped.log; exit 1; }
"$vlrnn" train train.json --out stopped --resume --allow-dirty > resumed.log 2>&1
diff <(losses_of straight) <(losses_of stopped) > diff.txt || {
  echo "FAIL: the resumed run's losses differ from the straight run's:"; head diff.txt; exit 1; }
echo "train: stopped (rc=$rc) and resumed run identical to the straight run"

if [[ -n $plugin ]]; then
  echo "== vlrnn train --plugin: a plugin's kind with the head file"
  sed -e 's/"model": {"model_file": "cell.pt"}/"model": {"kind": "indrnn", "hidden": 16}/' \
      -e 's/"optimizer_steps": 200/"optimizer_steps": 6/' \
    train.json > plugin.json
  "$vlrnn" train plugin.json --plugin "$plugin" --out plugin_out --allow-dirty > plugin.log 2>&1 || {
    cat plugin.log; exit 1; }
  [[ $(grep -c '"kind":"train_step"' plugin_out/results.jsonl) == 12 ]]
  grep -q '"model":"indrnn"' plugin_out/results.jsonl
  "$vlrnn" train plugin.json --plugin "$plugin" --out plugin_out --resume --allow-dirty > /dev/null 2>&1
  echo "train: the plugin's indrnn trained with head.pt and resumed"
fi

echo "== heads with the wrong signature, and heads that do not fit"
failures=0
expect_error() {  # what the error must mention, then the command
  local want=$1 out rc=0
  shift
  out=$("$@" 2>&1) || rc=$?
  if ((rc != 2)) || ! grep -qF -- "$want" <<<"$out" || grep -qE 'frame #|terminate called' <<<"$out"; then
    echo "FAIL ($rc): $* : expected an error mentioning '$want'"
    sed 's/^/    /' <<<"$out" | head -10
    failures=$((failures + 1))
  else
    echo "ok   $(grep -m1 'error' <<<"$out")"
  fi
}
expect_error "2 arguments" "$vlrnn" verify --head-file broken_arity.pt
expect_error "shape [T, B] = [3, 2]" "$vlrnn" verify --head-file broken_reduced.pt
expect_error "must not reduce or mix steps" "$vlrnn" verify --head-file broken_mixes.pt
expect_error "found neither" "$vlrnn" verify --head-file broken_no-targets.pt
expect_error "found input_size Z = 16" "$vlrnn" compare --head-file head.pt --hidden 8 --T 8
sed 's/"alphabet": 4/"alphabet": 5/; s/"model": {"model_file": "cell.pt"}/"model": {"kind": "gru", "hidden": 16}/' train.json > wrong_targets.json
expect_error "config head_file" "$vlrnn" train wrong_targets.json --out wrong --allow-dirty
exit $((failures > 0))
