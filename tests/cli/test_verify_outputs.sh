#!/usr/bin/env bash
# Issue 28 parts 4, 5 and 7, at the command line: `verify --model-file` at the user's shapes
# (--T 500 was refused) with B in its header and rows named by the file, not its path;
# `compare --check` as a pass/fail with verify's tolerances; a model that draws its dropout
# mask once per call warned about although it passes on this CPU; one explanation for many
# rows failing the same way; compare's header and RSS column, and sweep's progress, saying
# what they measure. Skips (exit 77) when Python's torch is not importable.
# Usage: test_verify_outputs.sh path/to/vlrnn
set -uo pipefail
vlrnn=$(realpath "${1:?usage: test_verify_outputs.sh path/to/vlrnn}")
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
source "$source_dir/tests/torch_python.sh"  # sets python, or skips (exit 77)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/some/deep/folder"
cd "$work"
export_each export_cell some/deep/folder/cell.pt "per_call.pt --per-call-mask TBH" \
  "locked.pt --per-call-mask BH" > /dev/null

failures=0
check() {  # description, then a command whose status says whether it holds
  local what=$1
  shift
  if "$@"; then
    echo "ok   $what"
  else
    echo "FAIL $what"
    failures=$((failures + 1))
  fi
}
has() { grep -qF -- "$2" "$1"; }
lacks() { ! grep -qF -- "$2" "$1"; }
count_is() { [[ $(grep -cF -- "$2" "$1") == "$3" ]]; }

echo "== part 4: verify --model-file at the user's shapes"
rc=0
"$vlrnn" verify --model-file "$work/some/deep/folder/cell.pt" --T 500 --batch 5 --dtype float64 \
  --methods vlrnn:block_length=64 > shapes.txt 2> shapes.err || rc=$?
sed 's/^/    /' shapes.txt | head -3
check "--T 500 --batch 5 runs and passes (exit $rc)" test "$rc" = 0
check "the header names T and B" has shapes.txt "T=500 B=5"
check "every row is at T=500" bash -c "! grep -E '^cell' shapes.txt | grep -vq 'T=500'"
check "12 cases: 1 method x 2 reductions x 1 dtype x 2 h0 modes x 3 length sets" \
  has shapes.txt "verify: 12 passed, 0 failed"
check "progress and an ETA at the user's shapes" has shapes.err "verify: 12/12 cases"
rc=0
"$vlrnn" verify --model-file some/deep/folder/cell.pt --T 40 --batch 6 --min-length 0.5 \
  --dtype float32 --methods checkpoint > lengths.txt 2>&1 || rc=$?
check "--min-length draws one variable-length batch (exit $rc)" \
  bash -c "test $rc = 0 && grep -q 'B=6 | lengths 40,' lengths.txt && grep -q 'verify: 4 passed, 0 failed' lengths.txt"
for bad in "--T 0|--T: expected >= 1" "--batch 0|--batch: expected >= 1" \
           "--dtype float16|--dtype: expected float32 or float64" \
           "--min-length 1.5|--min-length: expected a fraction" \
           "--methods nosuch|--methods: method: unknown name" \
           "--methods full|--methods: expected at least one method besides full"; do
  args=${bad%%|*}
  rc=0
  # shellcheck disable=SC2086
  "$vlrnn" verify --model-file some/deep/folder/cell.pt $args > bad.txt 2>&1 || rc=$?
  check "verify $args: exit 2 naming the flag" bash -c "test $rc = 2 && grep -qF -- '${bad#*|}' bad.txt"
done
rc=0
"$vlrnn" verify --T 500 > bad.txt 2>&1 || rc=$?
check "--T without --model: exit 2, saying it needs one" \
  bash -c "test $rc = 2 && grep -q 'expected with --model, --model-file or --head-file' bad.txt"

echo "== part 4: compare --check"
rc=0
"$vlrnn" compare --model-file some/deep/folder/cell.pt --T 64 --batch 4 \
  --methods full,vlrnn,tbptt:k=8 --repeats 1 --warmup 0 --quiet --check --json compare.json \
  --allow-dirty > compare.txt 2>&1 || rc=$?
check "an exact model passes --check (exit $rc)" \
  bash -c "test $rc = 0 && grep -q 'check: 2 passed, 0 failed' compare.txt && grep -q 'tbptt(k=8): approx' compare.txt"
rc=0
"$vlrnn" compare --model-file locked.pt --T 64 --batch 4 --methods full,vlrnn --repeats 1 \
  --warmup 0 --quiet --check > compare_fail.txt 2>&1 || rc=$?
check "a cut-dependent model fails --check with exit 1 (exit $rc)" \
  bash -c "test $rc = 1 && grep -q 'vlrnn(K=auto): FAIL' compare_fail.txt"
rc=0
"$vlrnn" compare --model-file locked.pt --check --no-error > bad.txt 2>&1 || rc=$?
check "--check --no-error: exit 2" bash -c "test $rc = 2 && grep -q -- '--check: expected the gradient comparison' bad.txt"

echo "== part 5: a mask drawn once per call"
rc=0
"$vlrnn" verify --model-file per_call.pt --dtype float64 --methods vlrnn:block_length=7 > per_call.txt 2>&1 || rc=$?
check "it passes on this CPU (exit $rc)" has per_call.txt "verify: 12 passed, 0 failed"
check "and is warned about, once before the table and once after" \
  bash -c "grep -q '^WARNING: the model draws its random numbers (dropout masks) once per forward() call' per_call.txt && grep -q 'does not carry over to a GPU' per_call.txt"
check "a model drawing per step gets no warning" lacks shapes.txt "WARNING"

echo "== part 7: outputs that mislead"
# (Only flags the tool had before, so that each check fails on the old output itself.)
"$vlrnn" verify --model-file "$work/some/deep/folder/cell.pt" --filter block_length=7 > named.txt 2>&1
check "rows name the file, not its folder" \
  bash -c "grep -q '^cell.pt/ce/' named.txt && ! grep -q 'deep/folder/cell.pt' <(grep ' vlrnn:block_length=7 ' named.txt)"
rc=0
"$vlrnn" verify --model-file locked.pt --filter block_length=7 > locked.txt 2>&1 || rc=$?
check "a cut-dependent model fails (exit $rc)" bash -c "test $rc = 1 && grep -q 'verify: 0 passed, 24 failed' locked.txt"
check "its explanation is printed once for its 24 rows" \
  bash -c "[[ \$(grep -c 'depend on where the sequence is cut' locked.txt) == 1 ]] && grep -q 'likely cause \[1\] of 24 failed rows' locked.txt"
check "compare's header: no L=1 for a model file" \
  bash -c "grep '^vlrnn compare:' compare.txt | grep -q 'cell.pt F=8 H=16' && ! grep '^vlrnn compare:' compare.txt | grep -q ' L=1 '"
check "compare's JSON: no layers for a model file that does not say" \
  "$python" -c "import json, sys; sys.exit('layers' in json.load(open('compare.json'))['meta']['problem'])"
check "compare's RSS column says whose peak it is" \
  bash -c "grep -qE 'proc RSS/iter|proc RSS life' compare.txt && ! grep -q 'peak RSS' compare.txt"
cat > sweep.json <<'JSON'
{"name": "progress", "models": ["rnn"], "hidden": [8], "input": 4, "methods": ["full"],
 "T": [16], "batch": [2], "repeats": 1, "warmup": 0, "gradient_error": false}
JSON
rc=0
"$vlrnn" sweep sweep.json --out sweep_out --allow-dirty > sweep.txt 2>&1 || rc=$?
check "sweep's progress says per iteration, not per step (exit $rc)" \
  bash -c "test $rc = 0 && grep -q ' per iteration, iteration peak' sweep.txt && ! grep -q ' per step, ' sweep.txt"
exit $((failures > 0))
