#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs the whole GoogleTest suite, then
# the sharded sweep on a real one-node Slurm (scripts/test_slurm.sh; VLRNN_SKIP_SLURM=1 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
cd build
ctest --output-on-failure --timeout 600 -j "$(nproc)"
cd ..
scripts/test_slurm.sh
