#!/usr/bin/env python3
"""Fails when a folder includes a header of a folder above it (docs/architecture.md).

Layers, lowest first, each a CMake target: vlrnn/ (vlrnn_core) < baselines/ < registry/ <
verify/ < experiments/. Inside vlrnn/, core/ includes only core/, and cells/ only core/ and
cells/ (the factory naming both lives in registry/). tests/ and examples/ sit on top.

Usage: check_layers.py [ROOT]      check the tree at ROOT (default: this repository)
       check_layers.py --self-test prove that a tree breaking the rule fails
"""
import os
import re
import sys
import tempfile

LAYERS = ["vlrnn", "baselines", "registry", "verify", "experiments"]  # lowest first
# Inside vlrnn/: the folders each one may include (the rest may include any of vlrnn/).
CORE_ALLOWED = {"core": {"core"}, "cells": {"core", "cells"}}
SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def header_layer(root, header):
    """The layer folder whose include/ holds `header`, or the experiments' own headers."""
    for layer in LAYERS[:-1]:
        if os.path.isfile(os.path.join(root, layer, "include", header)):
            return layer
    if os.path.isfile(os.path.join(root, "experiments", header)):
        return "experiments"
    return None  # a system or third-party header


def core_folder(relative_path):
    """'core' for vlrnn/include/vlrnn/core/x.h or vlrnn/src/core/x.cpp; None for vlrnn/x.h."""
    parts = relative_path.split("/")
    if parts[:3] == ["vlrnn", "include", "vlrnn"] and len(parts) > 4:
        return parts[3]
    if parts[:2] == ["vlrnn", "src"] and len(parts) > 3:
        return parts[2]
    return None


def violations(root):
    found = []
    for layer in LAYERS:
        for directory, _, files in os.walk(os.path.join(root, layer)):
            for name in sorted(files):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.join(directory, name)
                relative = os.path.relpath(path, root).replace(os.sep, "/")
                with open(path, encoding="utf-8", errors="replace") as source:
                    for number, line in enumerate(source, 1):
                        match = INCLUDE.match(line)
                        if not match:
                            continue
                        header = match.group(1)
                        target = header_layer(root, header)
                        if target is None:
                            continue
                        where = f"{relative}:{number}: includes {header}"
                        if LAYERS.index(target) > LAYERS.index(layer):
                            found.append(f"{where} (layer {target}/ is above {layer}/)")
                        elif layer == target == "vlrnn":
                            mine, theirs = core_folder(relative), core_folder("vlrnn/include/" + header)
                            if mine in CORE_ALLOWED and theirs not in CORE_ALLOWED[mine]:
                                found.append(f"{where} (vlrnn/{mine}/ may include only "
                                             f"{', '.join(sorted(CORE_ALLOWED[mine]))})")
    return found


def self_test():
    files = {
        "vlrnn/include/vlrnn/core/state.h": "#pragma once\n",
        "vlrnn/include/vlrnn/cells/gru.h": '#include "vlrnn/core/state.h"\n',
        "vlrnn/src/core/models.cpp": '#include "vlrnn/cells/gru.h"\n',  # core -> cells
        "vlrnn/include/vlrnn/methods/method.h": '#include "vlrnn/registry/methods.h"\n',  # up
        "registry/include/vlrnn/registry/methods.h": '#include "vlrnn/cells/gru.h"\n',  # fine
        "verify/src/matrix.cpp": '#include <vlrnn/registry/methods.h>\n#include <vector>\n',
        "baselines/src/full.cpp": '#include "lib/problem.h"\n',  # experiments -> up
        "experiments/lib/problem.h": '#include "vlrnn/verify/x.h"\n',
    }
    with tempfile.TemporaryDirectory() as root:
        for relative, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, relative)), exist_ok=True)
            with open(os.path.join(root, relative), "w") as f:
                f.write(text)
        found = violations(root)
    expected = ["vlrnn/src/core/models.cpp", "vlrnn/include/vlrnn/methods/method.h",
                "baselines/src/full.cpp"]
    ok = len(found) == len(expected) and all(any(f.startswith(e) for f in found) for e in expected)
    print("\n".join(found))
    print(f"self-test: {'ok' if ok else 'FAILED'}: expected {len(expected)} violations "
          f"({', '.join(expected)}), found {len(found)}")
    return 0 if ok else 1


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    found = violations(os.path.abspath(root))
    for line in found:
        print(line)
    print(f"layers {' < '.join(l + '/' for l in LAYERS)}: {len(found)} upward include(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
