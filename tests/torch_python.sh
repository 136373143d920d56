# Sourced by the shell tests that export TorchScript files: sets `python` to the first of
# $VLRNN_PYTHON, /usr/bin/python3 (Debian's python3-torch lives in its packages; a pyenv
# python3 first on PATH lacks it) and python3 that imports torch, or skips the test (exit 77,
# which ctest counts as skipped) saying what to install.
python=${VLRNN_PYTHON:-}
for candidate in /usr/bin/python3 python3; do
  if [[ -z $python ]] && "$candidate" -c 'import torch' 2>/dev/null; then python=$candidate; fi
done
if [[ -z $python ]]; then
  echo "SKIP: no python3 can import torch (install python3-torch: scripts/install_deps.sh)"
  exit 77
fi
