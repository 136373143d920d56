#!/usr/bin/env bash
# The Python package's pip install, as a user makes it: a fresh venv that sees the system's
# torch (--system-site-packages), `pip install --no-build-isolation .` from the checkout
# (offline: --no-index), then, from a folder outside the checkout, `import vlrnn`, a training
# loop and the user's exactness test run against the installed package (the other examples
# run against the build in tests/python/test_examples.py: the same files, imported from
# elsewhere). BUILD_DIR is reused as the install's CMake build (VLRNN_BUILD_DIR; setup.py),
# so the test costs no second build.
# Usage: test_pip_install.sh SOURCE_DIR BUILD_DIR PYTHON
set -euo pipefail
source_dir=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
python=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m venv --system-site-packages "$work/venv"
VLRNN_BUILD_DIR=$build "$work/venv/bin/pip" install --quiet --no-build-isolation --no-index \
  "$source_dir"
cd "$work"  # nothing of the checkout on sys.path
"$work/venv/bin/python" - "$work/venv" <<'PY'
import sys
import vlrnn
assert vlrnn.__file__.startswith(sys.argv[1]), vlrnn.__file__
print(f"vlrnn {vlrnn.__version__} imported from {vlrnn.__file__}")
PY
echo "== examples/python/train_loop.py"
"$work/venv/bin/python" "$source_dir/examples/python/train_loop.py" | tail -n 2
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider --rootdir "$work" \
  "$source_dir/examples/python/test_my_model_is_exact.py"
