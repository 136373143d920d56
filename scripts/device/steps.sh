# shellcheck shell=bash
# The device scripts' common part (sourced by check.sh and bench.sh, from the repository
# root): where results go, what the machine has, and steps that each run under a time limit
# so that the whole command ends, with its summary written, inside the device tool's limit.
#   $out     results ($OUT; the tool returns at most 8 files from it)
#   $device  cuda where the machine's torch sees a GPU, else cpu
#   step NAME CAP COMMAND...   runs COMMAND (or a function of the script, export -f) for at
#                              most CAP seconds (on a GPU machine) and what is left of
#                              $total (the script's whole budget, in seconds); with
#                              VLRNN_SKIP_PASSED=1, not if it passed in an earlier call at
#                              the same VLRNN_COMMIT
#   finish TITLE               writes summary.md (each step's exit status, seconds and last
#                              line) and steps.log (their output); exits 1 if any failed
total=${total:?set by the sourcing script: its budget in seconds}
out=${OUT:-build-device/out}
mkdir -p "$out"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# The machine's copy of the tree is no git checkout: the caller names the commit.
commit=${VLRNN_COMMIT:-$(git rev-parse --short HEAD 2> /dev/null || echo unknown)}
# The first Python that imports torch (a pyenv python3 first on PATH may lack it).
python=${VLRNN_DEVICE_PYTHON:-}
for candidate in python3 /usr/bin/python3; do
  if [[ -z $python ]] && "$candidate" -c 'import torch' 2> /dev/null; then python=$candidate; fi
done
python=${python:-python3}
build=$(realpath -m "${VLRNN_DEVICE_BUILD:-build-device/build}")  # check.sh builds, bench.sh reads
device=cpu
if "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null; then
  device=cuda
fi
status=()  # "name rc seconds"
# NOTE [ A rerun runs what is left ]: device minutes are few, and a first call on a fresh
# machine may spend most of its budget building, so the steps after are cut short. Each step
# that passes under an explicit VLRNN_COMMIT leaves a mark beside the build it used; the
# rerun on the warm machine, with VLRNN_SKIP_PASSED=1, skips each step marked at that commit,
# and the steps left get the whole budget. Asked for, never by default: a second run that
# wants everything again (a test, a developer's checkout) gets it. The skipped steps' files
# came back with the earlier call.
passed_dir=""
if [[ -n ${VLRNN_COMMIT:-} ]]; then
  passed_dir=$build/steps-passed/$VLRNN_COMMIT
  mkdir -p "$passed_dir"
fi
script=$(basename "$0" .sh)
# A step may be one of the script's functions (export -f): it runs in a child bash, which
# sees these.
export out build python device commit

step() {
  local name=$1 cap=$2 start=$SECONDS rc limit
  shift 2
  # The caps are sized for the GPU machine (16 cores); on a CPU the budget alone bounds.
  [[ $device == cpu ]] && cap=$total
  limit=$((total - SECONDS < cap ? total - SECONDS : cap))
  echo "== $name"
  if [[ ${VLRNN_SKIP_PASSED:-} == 1 && -n $passed_dir && -e $passed_dir/$script.$name ]]; then
    echo "(passed in an earlier call at $commit: not run again)" > "$logs/$name.log"
    rc=0
  elif ((limit < 1)); then
    echo "(not run: the script's $total s were spent)" > "$logs/$name.log"
    rc=124
  else
    timeout "$limit" bash -c '"$@"' "$name" "$@" > "$logs/$name.log" 2>&1
    rc=$?
    ((rc == 124)) && echo "(stopped at its limit of $limit s)" >> "$logs/$name.log"
    [[ $rc == 0 && -n $passed_dir ]] && touch "$passed_dir/$script.$name"
  fi
  tail -n 3 "$logs/$name.log"
  status+=("$name $rc $((SECONDS - start))")
}

finish() {
  local failed=0 entry name rc seconds
  {
    echo "# $1 on $device, $(date -u +%FT%TZ), commit $commit"
    echo
    echo "| step | exit | seconds | last line |"
    echo "|---|---|---|---|"
    for entry in "${status[@]}"; do
      read -r name rc seconds <<< "$entry"
      ((rc != 0)) && failed=1
      echo "| $name | $rc | $seconds | $(tail -n 1 "$logs/$name.log" | tr '|' '/') |"
    done
  } > "$out/summary.md"
  for entry in "${status[@]}"; do
    read -r name _ <<< "$entry"
    echo "== $name" && cat "$logs/$name.log"
  done > "$out/steps.log"
  cat "$out/summary.md"
  exit $failed
}
