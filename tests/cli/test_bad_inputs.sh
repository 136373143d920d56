#!/usr/bin/env bash
# Every `vlrnn` subcommand, given bad flags, bad config values, a missing file or an
# unwritable output, prints a clear error naming the argument in one style ("vlrnn: error:
# ..." and exit code 2, CLI11's parse errors included): never an abort, a core dump or a
# C++ backtrace. Usage: test_bad_inputs.sh path/to/vlrnn
set -uo pipefail
vlrnn=$(realpath "${1:?usage: test_bad_inputs.sh path/to/vlrnn}")
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo '{"name": "bad", "experiments": [{"kind": "nosuch"}]}' > "$work/bad_kind.json"
echo '{"name": "bad", "experiments": [{"kind": "grid", "T": [-4]}]}' > "$work/bad_value.json"
echo '{not json' > "$work/broken.json"
echo '{"name": "old", "experiments": [{"block": [8]}]}' > "$work/old_block.json"
echo '{"time_steps": 4, "ops": ["forward_grad(0, 4)", "backward(0, 4)"]}' > "$work/plan4.json"
unwritable=/proc/vlrnn-cannot-write-here

failures=0
total=0
# expect "what the output must mention" args...
expect() {
  local fragment=$1
  shift
  total=$((total + 1))
  local out rc
  out=$(cd "$source_dir" && timeout 120 "$vlrnn" "$@" 2>&1 < /dev/null)
  rc=$?
  local problem=""
  if ((rc != 2)); then problem="exit code $rc, expected 2 (the one error style)"; fi
  if ((rc >= 124)); then problem="exit code $rc (a signal, a time-out or an abort)"; fi
  if ! grep -q '^vlrnn: error: ' <<<"$out"; then
    problem="${problem:+$problem; }no 'vlrnn: error: ' line"
  fi
  if grep -qE 'frame #|Exception raised from|terminate called|core dumped|Aborted' <<<"$out"; then
    problem="${problem:+$problem; }a crash or a backtrace in the output"
  fi
  if ! grep -qF -- "$fragment" <<<"$out"; then problem="${problem:+$problem; }no mention of '$fragment'"; fi
  if [[ -n $problem ]]; then
    echo "FAIL vlrnn $*: $problem"
    sed 's/^/    /' <<<"$out" | head -20
    failures=$((failures + 1))
  else
    printf 'ok   vlrnn %-70s rc=%-3d %s\n' "$*" "$rc" "$(grep -m1 -iE 'error|expected|not expected|required|does not exist' <<<"$out")"
  fi
}

expect "subcommand" nosuchcommand
expect "--bogus" verify --bogus
expect "--random" verify --random x
expect "--filter" verify --filter no-case-has-this-name
expect "--random" verify --random-case 5 --random 3
expect "--json" verify --filter 'rnnx1/ce/sum/f64/h0=grad/T=28 vlrnn:block_length=7' --json "$unwritable/x.json"
expect "--out" verify --filter 'rnnx1/ce/sum/f64/h0=grad/T=28 vlrnn:block_length=7' --out "$unwritable"
expect "--bogus" methods --bogus
expect "model" compare --model nosuch --T 8 --hidden 4
expect "T" compare --T 0
expect "batch" compare --batch -1
expect "--hidden" compare --hidden abc
expect "--T = abc" compare --T abc
expect "GiB available" compare --T 100 --batch 100000000
expect "vlrnn block" compare --methods vlrnn:block_length=0 --T 8 --hidden 4
expect "nosuch" compare --methods nosuch --T 8 --hidden 4
expect "block" compare --methods vlrnn:block_length=x --T 8 --hidden 4
# The old spellings of the block options name their new ones.
expect "option 'block' is now 'block_length' (a length in steps)" compare --methods vlrnn:block=8 --T 8 --hidden 4
expect "option 'blocks' is now 'num_blocks' (a count of blocks)" compare --methods vlrnn:blocks=2 --T 8 --hidden 4
expect "dtype" compare --dtype float16 --T 8 --hidden 4
expect "METHOD@KIND" compare --T 8 --hidden 4 --methods full,full@
expect "nosuch" compare --T 8 --hidden 4 --methods full,full@nosuch
expect "models lstm and gru" compare --T 8 --hidden 4 --methods full,full@gru
expect "found none" compare --T 8 --hidden 4 --plan "$work/bad_kind.json"
expect "broken.json" compare --T 8 --hidden 4 --plan "$work/broken.json"
expect "recorded for T = 4" compare --T 8 --hidden 4 --plan "$work/plan4.json"
expect "--plan" train "$work/bad_kind.json" --plan "$work/nosuch.json"
expect "--repeats" compare --repeats 0 --T 8 --hidden 4
expect "--json" compare --T 8 --hidden 4 --batch 2 --json "$unwritable/x.json"
expect "config is required" sweep
expect "does not exist" sweep "$work/missing.json"
expect "not valid JSON" sweep "$work/broken.json" --out "$work/o1"
expect "kind" sweep "$work/bad_kind.json" --out "$work/o2"
expect "T" sweep "$work/bad_value.json" --out "$work/o3"
expect 'renamed to "block_length"' sweep "$work/old_block.json" --out "$work/o3b"
expect "--out" sweep experiments/configs/quick.json --out "$unwritable" --allow-dirty
expect "--shard" sweep experiments/configs/quick.json --shard 3/3 --out "$work/o4"
expect "--shard" sweep experiments/configs/quick.json --shard x --out "$work/o5"
expect "out is required" merge
expect "merge DIR" merge "$work/merged" "$work/missing-shard"
expect "T" budget --T 0
expect "--fractions" budget --T 16 --fractions x
expect "--fractions" budget --T 16 --fractions 0
expect "--methods" budget --T 16 --methods planner,nosuch
# One --device on every command that runs a model; no machine has a 100th GPU, and a build
# without CUDA says so.
for command in "verify --filter rnnx1" "compare --T 8 --hidden 4" "budget --T 16" \
               "sweep experiments/configs/quick.json --dry-run" \
               "train experiments/configs/train-copy.json"; do
  # shellcheck disable=SC2086  # the command's words
  expect "--device: \"cuda:99\"" $command --device cuda:99
done
expect "--device" verify --device tpu
expect "--threads" compare --threads 0 --T 8 --hidden 4
expect "--blas-threads" sweep experiments/configs/quick.json --blas-threads -1 --dry-run
expect "--until-stable" compare --until-stable 2 --T 8 --hidden 4
expect "--max-repeats" compare --until-stable 0.05 --max-repeats 2 --repeats 5 --T 8 --hidden 4

# The refusal of results from uncommitted or unknown code (--allow-dirty) and what meta.json
# records about the code: tests/cli/test_provenance.sh (ctest cli.provenance).

# Plugins and model files (lib/user_models.h): a missing file, a file that is no shared
# library or TorchScript module, a library without the entry point.
libc=$(ldd "$vlrnn" | awk '/libc\.so/ {print $3; exit}')
echo '{"name": "bad", "model_file": "/nonexistent/cell.pt"}' > "$work/bad_model_file.json"
expect "does not exist" verify --plugin "$work/missing.so" --model indrnn
expect "cannot load plugin" verify --plugin "$work/broken.json" --model indrnn
expect "has no symbol vlrnn_register_plugin" compare --plugin "$libc" --T 8 --hidden 4
expect "unknown kind" verify --model nosuch
expect "cannot read" verify --model-file "$work/missing.pt"
expect "torch::jit::load failed" compare --model-file "$work/broken.json" --T 8
expect "model_file" sweep "$work/bad_model_file.json" --out "$work/o6" --allow-dirty

# vlrnn train
echo '{"task": {"kind": "copy", "delay": 4}, "methods": ["nosuch"]}' > "$work/train_bad_method.json"
echo '{"task": {"kind": "copy"}, "methods": ["full"]}' > "$work/train_no_delay.json"
echo '{"task": {"kind": "text", "path": "/no/such.txt", "time_steps": 8},
      "methods": ["full"]}' > "$work/train_no_text.json"
echo '{"task": {"kind": "adding", "time_steps": 8}, "methods": ["full"],
      "optimizer": {"lr": -1}}' > "$work/train_bad_lr.json"
echo '{"task": {"kind": "adding", "time_steps": 8}, "methods": ["full"],
      "optimizer_steps": 2}' > "$work/train_ok.json"
echo '{"task": {"kind": "adding", "time_steps": 8}, "methods": ["vlrnn"],
      "optimizer_steps": 2}' > "$work/train_other.json"
# "steps", the older name of both counts, names the new key of each.
echo '{"task": {"kind": "adding", "time_steps": 8}, "methods": ["full"],
      "steps": 2}' > "$work/train_old_steps.json"
echo '{"task": {"kind": "adding", "steps": 8}, "methods": ["full"],
      "optimizer_steps": 2}' > "$work/train_old_task_steps.json"
expect "methods[0]" train "$work/train_bad_method.json" --out "$work/t1" --allow-dirty
expect "task.delay" train "$work/train_no_delay.json" --out "$work/t2" --allow-dirty
expect "cannot read the text file" train "$work/train_no_text.json" --out "$work/t3" --allow-dirty
echo '{"task": {"kind": "fashion_mnist", "path": "/no/such/fmnist"}, "methods": ["full"]}' > "$work/train_no_fmnist.json"
expect "apt-get install dataset-fashion-mnist" train "$work/train_no_fmnist.json" --out "$work/t3b" --allow-dirty
expect "optimizer.lr" train "$work/train_bad_lr.json" --out "$work/t4" --allow-dirty
expect 'config steps: renamed to "optimizer_steps"' \
  train "$work/train_old_steps.json" --out "$work/t4b" --allow-dirty
expect 'config task.steps: renamed to "task.time_steps"' \
  train "$work/train_old_task_steps.json" --out "$work/t4c" --allow-dirty
echo '{"task": {"kind": "adding", "time_steps": 100}, "methods": ["full"],
      "batch": 100000000}' > "$work/train_huge_batch.json"
expect "GiB available" train "$work/train_huge_batch.json" --out "$work/t6" --allow-dirty
expect "config" train "$work/missing.json"
(cd "$source_dir" && "$vlrnn" train "$work/train_ok.json" --out "$work/t5" --allow-dirty > /dev/null 2>&1)
expect "different config" train "$work/train_other.json" --out "$work/t5" --resume --allow-dirty
# A folder trained before the "steps" rename (meta.json's config in the old keys) is the
# same config as its rewrite in the new ones: --resume takes it, no "different config".
total=$((total + 1))
if out=$(/usr/bin/env python3 - "$work/t5/meta.json" 2>&1 <<'PY'
import json, sys
meta = json.load(open(sys.argv[1]))
config = meta["config"]
config["steps"] = config.pop("optimizer_steps")
config["task"]["steps"] = config["task"].pop("time_steps")
json.dump(meta, open(sys.argv[1], "w"))
PY
) && out=$(cd "$source_dir" && "$vlrnn" train "$work/train_ok.json" --out "$work/t5" --resume \
             --allow-dirty 2>&1); then
  echo "ok   vlrnn train --resume of a folder whose meta.json has the old \"steps\" keys"
else
  echo "FAIL vlrnn train --resume of a folder whose meta.json has the old \"steps\" keys:"
  sed 's/^/    /' <<<"$out" | head -20
  failures=$((failures + 1))
fi

echo "cli: $((total - failures)) passed, $failures failed"
((failures == 0))
