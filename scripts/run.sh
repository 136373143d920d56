#!/usr/bin/env bash
# The main job on a fresh machine: installs what is missing, builds, verifies gradients,
# runs the quick sweep (experiments/configs/quick.json, a few minutes on 2 cores) and draws
# its figures. Everything it writes goes into one folder of the user's, never over a tracked
# file (the committed results/ stay as they are):
#
#   scripts/run.sh                  # -> results/local-<YYYYMMDD-HHMMSS>/ (ignored by git)
#   scripts/run.sh --out DIR        # or VLRNN_OUT=DIR scripts/run.sh
#
# DIR/verify.json: the gradient check; DIR/results.jsonl, results.csv, meta.json: the sweep;
# DIR/figures/: its figures (scripts/plot.py).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${VLRNN_OUT:-results/local-$(date -u +%Y%m%d-%H%M%S)}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) [[ $# -ge 2 ]] || { echo "run.sh: --out needs a folder" >&2; exit 2; }; out=$2; shift 2 ;;
    --out=*) out=${1#--out=}; shift ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (usage: scripts/run.sh [--out DIR])" >&2; exit 2 ;;
  esac
done
scripts/install_deps.sh
scripts/build.sh
mkdir -p "$out"
build/vlrnn verify --json "$out/verify.json"
build/vlrnn sweep experiments/configs/quick.json --out "$out"
# Debian's python3-matplotlib serves /usr/bin/python3; another python3 first on PATH (pyenv,
# a virtualenv) may lack it.
python=python3
if ! "$python" -c "import matplotlib" >/dev/null 2>&1 && [[ -x /usr/bin/python3 ]]; then
  python=/usr/bin/python3
fi
"$python" scripts/plot.py "$out"
echo "run.sh: verification, sweep and figures in $out/"
