#!/usr/bin/env bash
# `vlrnn train` end to end, in seconds: a config trains every method, logs every step, and a
# run stopped by Ctrl-C (SIGINT) and resumed with --resume ends with the same losses as one
# that never stopped (NOTE [ Resuming is bit-for-bit ] in experiments/lib/trainer.h).
# Usage: test_train.sh path/to/vlrnn
set -euo pipefail
vlrnn=$(realpath "${1:?usage: test_train.sh path/to/vlrnn}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/config.json" <<'JSON'
{
  "name": "smoke",
  "task": {"kind": "copy", "delay": 12, "symbols": 2, "alphabet": 4, "min_length": 0.5},
  "model": {"kind": "gru", "hidden": 8, "carry_bias": 2},
  "methods": ["full", "vlrnn:block_length=4", "tbptt:k=4"],
  "seeds": [1, 2],
  "batch": 4, "optimizer_steps": 300,
  "optimizer": {"kind": "adam", "lr": 0.01, "clip": 1.0},
  "eval_every": 50, "eval_batches": 1, "checkpoint_every": 10
}
JSON
steps_of() { grep -c '"kind":"train_step"' "$1/results.jsonl"; }
losses_of() { /usr/bin/env python3 - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1] + "/results.jsonl"):
    r = json.loads(line)
    if r["kind"] == "train_step":
        print(r["run"], r["step"], repr(r["loss"]), repr(r["grad_norm"]), r.get("eval_loss"))
PY
}

"$vlrnn" train "$work/config.json" --out "$work/straight" --allow-dirty > "$work/straight.log" 2>&1
[[ $(steps_of "$work/straight") == 1800 ]] || { echo "FAIL: expected 1800 step records"; exit 1; }
grep -q '"kind":"train_run"' "$work/straight/results.jsonl"
[[ -f "$work/straight/meta.json" && -f "$work/straight/results.csv" ]]

# Ctrl-C once the first run has checkpointed (step 10 of 1800: the rest of the run takes far
# longer than the poll); it stops after the current step. A run that ends before the signal,
# or ignores it, fails the test: the resume below must start from a real interruption.
"$vlrnn" train "$work/config.json" --out "$work/stopped" --allow-dirty > "$work/stopped.log" 2>&1 &
pid=$!
for _ in $(seq 1 2400); do
  [[ -n $(ls "$work/stopped/checkpoints" 2>/dev/null) ]] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.05
done
kill -0 "$pid" 2>/dev/null || {
  echo "FAIL: the run ended before it could be interrupted"; cat "$work/stopped.log"; exit 1; }
[[ -n $(ls "$work/stopped/checkpoints" 2>/dev/null) ]] || {
  echo "FAIL: no checkpoint within 120 s"; kill "$pid"; cat "$work/stopped.log"; exit 1; }
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
[[ $rc == 130 ]] || { echo "FAIL: stopped run exited $rc, expected 130"; cat "$work/stopped.log"; exit 1; }
status=$(/usr/bin/env python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["status"])' \
         "$work/stopped/meta.json")
[[ $status == interrupted ]] || { echo "FAIL: meta.json status '$status', expected interrupted"; exit 1; }
stopped_steps=$(steps_of "$work/stopped")
((stopped_steps > 0 && stopped_steps < 1800)) || {
  echo "FAIL: the stopped run logged $stopped_steps steps, expected some but not all 1800"; exit 1; }
"$vlrnn" train "$work/config.json" --out "$work/stopped" --resume --allow-dirty > "$work/resumed.log" 2>&1
diff <(losses_of "$work/straight") <(losses_of "$work/stopped") > "$work/diff" || {
  echo "FAIL: the resumed run's losses differ from the straight run's:"; head "$work/diff"; exit 1; }
[[ $(steps_of "$work/stopped") == 1800 ]] || { echo "FAIL: the resumed run did not log 1800 steps"; exit 1; }
echo "train: 1800 steps logged; stopped after $stopped_steps steps (rc=$rc), resumed, identical to the straight run"

# Fashion-MNIST end to end when dataset-fashion-mnist is installed (scripts/install_deps.sh
# installs it): a few steps of a small LSTM on the permuted task log the held-out accuracy.
if [[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]]; then
  cat > "$work/fmnist.json" <<'JSON'
{"name": "fmnist-smoke", "task": {"kind": "fashion_mnist", "permuted": true},
 "model": {"kind": "lstm", "hidden": 8}, "methods": ["vlrnn:block_length=28", "tbptt:k=28"],
 "seeds": [1], "batch": 4, "optimizer_steps": 2,
 "eval_every": 2, "eval_batches": 1, "eval_batch": 16}
JSON
  "$vlrnn" train "$work/fmnist.json" --out "$work/fmnist" --allow-dirty > "$work/fmnist.log" 2>&1 ||
    { echo "FAIL: the Fashion-MNIST run failed:"; cat "$work/fmnist.log"; exit 1; }
  [[ $(grep -c '"eval_accuracy"' "$work/fmnist/results.jsonl") == 2 ]] ||
    { echo "FAIL: expected one eval_accuracy per Fashion-MNIST run"; exit 1; }
  grep -q "accuracy" "$work/fmnist.log"
  echo "train: Fashion-MNIST (permuted, T=784) trained and evaluated with accuracy"
else
  echo "note: dataset-fashion-mnist is not installed; its end-to-end run skipped"
fi
