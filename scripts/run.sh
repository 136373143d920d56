#!/usr/bin/env bash
# The main job on a fresh machine: installs what is missing, builds, verifies gradients,
# runs the quick sweep (experiments/configs/quick.json, a few minutes on 2 cores) and draws
# its figures into results/cpu-quick/figures/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
build/vlrnn verify --json build/verify.json
build/vlrnn sweep experiments/configs/quick.json --out results/cpu-quick
# Debian's python3-matplotlib serves /usr/bin/python3; another python3 first on PATH (pyenv,
# a virtualenv) may lack it.
python=python3
if ! "$python" -c "import matplotlib" >/dev/null 2>&1 && [[ -x /usr/bin/python3 ]]; then
  python=/usr/bin/python3
fi
"$python" scripts/plot.py results/cpu-quick
