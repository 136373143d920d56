#!/usr/bin/env bash
# Runs README.md's "Quick start" as a newcomer would, line by line, from the README itself
# (so the two cannot drift): in a scratch folder that sees the checkout's scripts/ and
# examples/ and the build under test as build/. The install-and-build line is the one
# skipped: scripts/test.sh runs both before ctest. Each other line must exit 0, and what the
# quick start promises must exist afterwards (the verify verdict, cmp.json, the figure).
# Skips (exit 77) when no python3 can import torch.
# Usage: test_quick_start.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir=$(cd "${1:?usage: test_quick_start.sh SOURCE_DIR BUILD_DIR}" && pwd)
build_dir=$(cd "${2:?usage: test_quick_start.sh SOURCE_DIR BUILD_DIR}" && pwd)
if ! /usr/bin/python3 -c 'import torch, matplotlib' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 cannot import torch and matplotlib (scripts/install_deps.sh)"
  exit 77
fi

# The first ```sh block after the "## Quick start" heading.
block=$(awk '/^## Quick start/ {inside = 1; next}
             inside && /^```sh/ {code = 1; next}
             code && /^```/ {exit}
             code {print}' "$source_dir/README.md")
if [[ -z $block ]]; then
  echo "FAIL: README.md has no \`\`\`sh block under '## Quick start'"
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$source_dir/scripts" "$work/scripts"
ln -s "$source_dir/examples" "$work/examples"
ln -s "$build_dir" "$work/build"
cd "$work"
# No python3 shim on PATH: the quick start names the Python it means (/usr/bin/python3, which
# has torch), as a newcomer whose PATH starts with another python3 (pyenv, conda) needs it.

ran=0
while IFS= read -r line; do
  command=${line%%#*}                              # drop the comment
  command=${command%"${command##*[![:space:]]}"}   # and trailing blanks
  [[ -z $command ]] && continue
  if [[ $command == "scripts/install_deps.sh && scripts/build.sh"* ]]; then
    echo "== skipped (scripts/test.sh ran it): $command"
    continue
  fi
  echo "== $command"
  if ! bash -c "set -eo pipefail; $command" > out.txt 2>&1; then
    cat out.txt
    echo "FAIL: the quick start's line failed: $command"
    exit 1
  fi
  tail -n 4 out.txt
  cat out.txt >> all.txt
  ran=$((ran + 1))
done <<< "$block"

grep -qE '^verify: [1-9][0-9]* passed, 0 failed' all.txt \
  || { echo "FAIL: no 'verify: N passed, 0 failed' line"; exit 1; }
for f in cmp.json cmp-figures/compare.png; do
  [[ -s $f ]] || { echo "FAIL: the quick start did not make $f"; exit 1; }
done
echo "quick start: $ran commands ran, each exited 0"
