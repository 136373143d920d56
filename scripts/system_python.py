"""Runs the calling script under Debian's /usr/bin/python3 when a module it needs is missing.

Debian's packages (python3-matplotlib, python3-torch) serve /usr/bin/python3; a python3
first on PATH (a pyenv shim) may not see them. Scripts call require("matplotlib") before
importing what they need; under another interpreter that lacks the module, the script is
run again under /usr/bin/python3 with the same arguments.
"""
import importlib.util
import os
import sys

SYSTEM_PYTHON = "/usr/bin/python3"


def require(module):
    if importlib.util.find_spec(module) is not None:
        return
    if os.path.exists(SYSTEM_PYTHON) and \
            os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON):
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON] + sys.argv)
    raise ModuleNotFoundError(f"{os.path.basename(sys.argv[0])} needs the Python module "
                              f"{module!r} (Debian: apt-get install python3-{module})")
