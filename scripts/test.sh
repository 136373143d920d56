#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs the whole suite through ctest (the
# GoogleTest cases, the layering check scripts/check_layers.py, and the install test: a
# find_package(vlrnn) project built against a temporary install, scripts/test_client_project.sh;
# the parsers under libFuzzer for a few seconds each, tests/fuzz/README.md),
# then the sharded sweep on a real one-node Slurm (scripts/test_slurm.sh; VLRNN_SKIP_SLURM=1
# skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
scripts/build_fuzzers.sh  # clang's libFuzzer targets (tests/fuzz/), run by ctest's fuzz.smoke
cd build
ctest --output-on-failure --timeout 600 -j "$(nproc)"
cd ..
scripts/test_slurm.sh
