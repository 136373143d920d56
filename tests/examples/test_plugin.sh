#!/usr/bin/env bash
# The stock `vlrnn` tool verifies and measures a cell it does not ship, registered by a
# plugin (examples/indrnn_plugin.cpp): `verify --model` passes every exact method, `compare`
# measures it, and VLRNN_PLUGINS loads it too. Usage: test_plugin.sh path/to/vlrnn plugin.so
set -euo pipefail
vlrnn=${1:?usage: test_plugin.sh path/to/vlrnn path/to/plugin.so}
plugin=${2:?usage: test_plugin.sh path/to/vlrnn path/to/plugin.so}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== vlrnn verify --plugin $plugin --model indrnn"
"$vlrnn" verify --plugin "$plugin" --model indrnn --failures-only | tee "$work/verify.txt"
grep -qE '^verify: [1-9][0-9]* passed, 0 failed' "$work/verify.txt"

echo "== vlrnn compare --plugin $plugin --model indrnn"
"$vlrnn" compare --plugin "$plugin" --model indrnn --T 256 --batch 4 --input 8 --hidden 32 \
  --methods full,vlrnn,checkpoint --repeats 2 --warmup 0 --quiet --json "$work/compare.json" \
  --allow-dirty  # a throw-away record, whatever state the checkout is in
python3 - "$work/compare.json" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["records"]
assert [r["status"] for r in runs] == ["ok"] * 3, runs
for r in runs:
    err = (r.get("error_vs_full") or {}).get("max_rel", 0.0)
    assert err <= 1e-5, (r["method"], err)
print("compare: 3 methods ok, gradients equal to full's")
PY

echo "== VLRNN_PLUGINS=$plugin vlrnn methods / verify --filter"
VLRNN_PLUGINS="$plugin" "$vlrnn" verify --model indrnn --filter 'f64/h0=grad/T=28/var vlrnn:block_length=7'
