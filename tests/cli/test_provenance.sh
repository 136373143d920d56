#!/usr/bin/env bash
# Results name the code that measured them (NOTE [ Provenance from the build ] in
# experiments/lib/source_stamp.h): run from a directory outside the checkout, or from another
# repository with uncommitted changes, `vlrnn compare --json` records the commit and the tree
# state of the source the binary was built from, never a clean tree it did not see; unknown
# (built without git) is recorded as "unknown" and refused like a dirty tree without
# --allow-dirty. Also checks the build's stamp script (cmake/VlrnnSourceStamp.cmake) on a tree
# without git and without a checkout.
#   test_provenance.sh path/to/vlrnn SOURCE_DIR
set -uo pipefail
vlrnn=$(realpath "${1:?usage: test_provenance.sh path/to/vlrnn SOURCE_DIR}")
source_dir=$(realpath "${2:?usage: test_provenance.sh path/to/vlrnn SOURCE_DIR}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
check() {  # "what" command...: the command must succeed
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; failures=$((failures + 1)); fi
}

# What the binary must have been stamped with, from git directly (the same rule as the stamp:
# tracked files outside results/); unknown without git or outside a checkout.
expected_sha=unknown
expected_dirty='"unknown"'
if command -v git >/dev/null 2>&1 &&
    top=$(git -C "$source_dir" rev-parse --show-toplevel 2>/dev/null) &&
    [[ $(realpath "$top") == "$source_dir" ]]; then
  expected_sha=$(git -C "$source_dir" rev-parse HEAD)
  if [[ -z $(git -C "$source_dir" status --porcelain --untracked-files=no -- . ':(exclude)results') ]]; then
    expected_dirty=false
  else
    expected_dirty=true
  fi
fi
echo "the build should say: git_sha $expected_sha, git_dirty $expected_dirty"

# meta of a compare --json FILE: "git_sha git_dirty" as JSON text
provenance_of() {
  python3 -c 'import json, sys; m = json.load(open(sys.argv[1]))["meta"]
print(m["git_sha"], json.dumps(m["git_dirty"]))' "$1"
}
compare=(compare --T 8 --hidden 4 --input 2 --batch 2 --repeats 1 --warmup 0 --methods full
         --no-error --quiet)

# 1. From a directory outside any checkout.
outside=$work/outside
mkdir -p "$outside"
(cd "$outside" && "$vlrnn" "${compare[@]}" --json r.json --allow-dirty > /dev/null 2>&1)
check "compare --json from $outside records the build's commit and tree state" \
  test "$(provenance_of "$outside/r.json" 2>/dev/null)" == "$expected_sha $expected_dirty"

# 2. From another repository with uncommitted changes: its state is not the binary's.
other=$work/other-checkout
if command -v git >/dev/null 2>&1; then
  mkdir -p "$other" && echo one > "$other/file"
  (cd "$other" && git init -q && git add file && git -c user.name=t -c user.email=t@t commit -qm init &&
     echo two >> file)
  (cd "$other" && "$vlrnn" "${compare[@]}" --json r.json --allow-dirty > /dev/null 2>&1)
  check "compare --json from a dirty foreign checkout still records the build's state" \
    test "$(provenance_of "$other/r.json" 2>/dev/null)" == "$expected_sha $expected_dirty"
fi

# 3. Without --allow-dirty: written from a clean build, refused (exit 2, naming --allow-dirty)
# from a dirty or unknown one, for every command that writes measurements.
refused() {  # args...: exit 2 with the provenance error
  local out rc
  out=$(cd "$outside" && timeout 120 "$vlrnn" "$@" 2>&1 < /dev/null)
  rc=$?
  ((rc == 2)) && grep -q '^vlrnn: error: .*refusing to write results' <<<"$out" &&
    grep -qF -- '--allow-dirty' <<<"$out" && grep -qF "git_dirty: $expected_dirty" <<<"$out"
}
cat > "$work/tiny.json" <<'JSON'
{"name": "tiny", "models": ["rnn"], "input": 2, "classes": 2,
 "experiments": [{"methods": ["full"], "T": 4, "batch": 2, "hidden": 3, "repeats": 1, "warmup": 0}]}
JSON
if [[ $expected_dirty == false ]]; then
  (cd "$outside" && "$vlrnn" "${compare[@]}" --json clean.json > /dev/null 2>&1)
  check "a clean build writes compare --json without --allow-dirty" \
    test "$(provenance_of "$outside/clean.json" 2>/dev/null)" == "$expected_sha false"
else
  check "compare --json refused from a $expected_dirty build" refused "${compare[@]}" --json refused.json
  check "sweep refused from a $expected_dirty build" refused sweep "$work/tiny.json" --out "$work/s"
  check "budget refused from a $expected_dirty build" refused budget --T 16 --out "$work/b"
  check "nothing written by a refused compare" test ! -s "$outside/refused.json"
fi

# 4. The stamp script: a source tree that is no checkout, or a machine without git, is
# "unknown" for both (never clean); this checkout gives its HEAD.
cmake_exe=$(command -v cmake)
stamp() {  # SOURCE_DIR [PATH]: "sha tree" as the generated .cpp says, git searched on PATH
  rm -f "$work/stamp.cpp"
  PATH=${2:-$PATH} "$cmake_exe" -DSOURCE_DIR="$1" -DOUTPUT="$work/stamp.cpp" \
    -P "$source_dir/cmake/VlrnnSourceStamp.cmake" &&
    sed -n 's/.*source_git_sha() { return "\(.*\)"; }/\1/p; s/.*source_tree() { return "\(.*\)"; }/\1/p' \
      "$work/stamp.cpp" | paste -sd' '
}
mkdir -p "$work/not-a-checkout"
check "stamp of a tree that is no checkout: unknown unknown" \
  test "$(stamp "$work/not-a-checkout")" == "unknown unknown"
check "stamp without git: unknown unknown" \
  test "$(stamp "$source_dir" "$work/no-such-bin")" == "unknown unknown"
if [[ -d $other ]]; then
  check "stamp of a subfolder of another checkout: unknown unknown" \
    test "$(mkdir -p "$other/sub" && stamp "$other/sub")" == "unknown unknown"
  check "stamp of a dirty checkout: its HEAD, dirty" \
    test "$(stamp "$other")" == "$(git -C "$other" rev-parse HEAD) dirty"
fi

echo "provenance: $failures failed"
((failures == 0))
