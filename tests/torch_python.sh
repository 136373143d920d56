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

# export_each NAME ARGS...: runs scripts/NAME.py's main() once per ARGS (one string of its
# shell-quoted arguments each) in one Python process, as `python3 scripts/NAME.py ARGS` would:
# each separate run spends a second or more importing torch. Stops at the first that fails.
export_each() {
  local name=$1
  shift
  "$python" -c '
import shlex, sys
sys.path.insert(0, sys.argv[1])
main = __import__(sys.argv[2]).main
for args in sys.argv[3:]:
    if main(shlex.split(args)) != 0:
        sys.exit(f"{sys.argv[2]}.py {args}: failed")
' "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/scripts" "$name" "$@"
}
