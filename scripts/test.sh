#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs the whole GoogleTest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
cd build
ctest --output-on-failure --timeout 600 -j "$(nproc)"
