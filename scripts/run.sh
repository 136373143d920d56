#!/usr/bin/env bash
# The main job on a fresh machine: installs what is missing, builds, verifies gradients.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
build/vlrnn verify --json build/verify.json
