#!/usr/bin/env python3
"""Fails when a folder includes a header of a folder above it (docs/architecture.md).

Layers, lowest first, each a CMake target: vlrnn/ (vlrnn_core) < baselines/ < registry/ <
verify/ < experiments/. Inside vlrnn/ (one target) the folders keep an order of their own,
core/ < cells/ < methods/ < measure/ < schedule/ < distributed/: a folder includes only itself
and the folders before it (the factory naming both core/ and cells/ lives in registry/). A folder
inside vlrnn/ that the order does not list fails too, so a new one must be given its place.
tests/ and examples/ sit on top. And no header includes itself through others (a cycle, which
the order cannot see inside one folder): what two headers share goes in a third.

Usage: check_layers.py [ROOT]      check the tree at ROOT (default: this repository)
       check_layers.py --self-test prove that a tree breaking the rule fails
"""
import os
import re
import sys
import tempfile

LAYERS = ["vlrnn", "baselines", "registry", "verify", "experiments"]  # lowest first
# Inside vlrnn/, lowest first: the GradientMethod interface and the block primitives
# (methods/) need only the model interfaces; the meters (measure/) measure a GradientMethod;
# the schedules, their executor, the VLRNN method and the planner (schedule/) use all of them;
# data-parallel training (distributed/) needs only batches and reductions, and nothing below
# it needs a process group.
ENGINE_FOLDERS = ["core", "cells", "methods", "measure", "schedule", "distributed"]
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


def engine_folder(relative_path):
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
                            problem = engine_violation(relative, "vlrnn/include/" + header)
                            if problem:
                                found.append(f"{where} ({problem})")
    return found


def include_cycles(root):
    """Every cycle of our headers including each other, as 'a.h -> b.h -> a.h' (one per
    cycle, from the header that sorts first)."""
    includes = {}  # header as included (vlrnn/core/x.h, lib/x.h) -> the headers of ours it includes
    for layer in LAYERS:
        for directory, _, files in os.walk(os.path.join(root, layer)):
            for name in files:
                if not name.endswith((".h", ".hpp", ".cuh")):
                    continue
                path = os.path.join(directory, name)
                relative = os.path.relpath(path, root).replace(os.sep, "/")
                if "/include/" in relative:
                    header = relative.split("/include/", 1)[1]
                elif layer == "experiments":
                    header = relative[len("experiments/"):]
                else:
                    continue  # a private header of a src/ folder: no one includes it by name
                with open(path, encoding="utf-8", errors="replace") as source:
                    found = [m.group(1) for m in map(INCLUDE.match, source) if m]
                includes[header] = sorted(h for h in found if header_layer(root, h) is not None)
    cycles, state = set(), {}  # state: 1 on the current path, 2 done

    def visit(header, path):
        state[header] = 1
        for included in includes.get(header, []):
            if state.get(included) == 1:
                loop = path[path.index(included):]
                first = loop.index(min(loop))
                loop = loop[first:] + loop[:first]
                cycles.add(" -> ".join(loop + [loop[0]]))
            elif included not in state:
                visit(included, path + [included])
        state[header] = 2

    for header in sorted(includes):
        if header not in state:
            visit(header, [header])
    return sorted(cycles)


def engine_violation(including, included):
    """Why a file of vlrnn/ may not include a header of vlrnn/, or None when it may."""
    mine, theirs = engine_folder(including), engine_folder(included)
    for folder in (mine, theirs):
        if folder is not None and folder not in ENGINE_FOLDERS:
            return (f"vlrnn/{folder}/ has no place in the order "
                    f"{' < '.join(ENGINE_FOLDERS)}: add it to ENGINE_FOLDERS")
    if mine is None or theirs is None:
        return None  # a file directly under vlrnn/include/vlrnn/ or vlrnn/src/
    if ENGINE_FOLDERS.index(theirs) > ENGINE_FOLDERS.index(mine):
        return f"vlrnn/{theirs}/ is above vlrnn/{mine}/ in {' < '.join(ENGINE_FOLDERS)}"
    return None


def self_test():
    files = {
        "vlrnn/include/vlrnn/core/state.h": "#pragma once\n",
        "vlrnn/include/vlrnn/cells/gru.h": '#include "vlrnn/core/state.h"\n',
        "vlrnn/src/core/models.cpp": '#include "vlrnn/cells/gru.h"\n',  # core -> cells
        "vlrnn/include/vlrnn/methods/method.h": '#include "vlrnn/registry/methods.h"\n',  # up
        # Inside vlrnn/: down the order is fine, up it is not.
        "vlrnn/include/vlrnn/measure/meter.h": '#include "vlrnn/methods/method.h"\n',
        "vlrnn/include/vlrnn/schedule/executor.h": '#include "vlrnn/measure/meter.h"\n',
        "vlrnn/src/schedule/executor.cpp": '#include "vlrnn/schedule/executor.h"\n',
        "vlrnn/src/methods/vlrnn.cpp": '#include "vlrnn/schedule/executor.h"\n',  # methods -> up
        "vlrnn/src/measure/flops.cpp": '#include <vlrnn/schedule/executor.h>\n',  # measure -> up
        "vlrnn/include/vlrnn/extra/x.h": '#include "vlrnn/core/state.h"\n',  # unplaced folder
        "registry/include/vlrnn/registry/methods.h": '#include "vlrnn/cells/gru.h"\n',  # fine
        "verify/src/matrix.cpp": '#include <vlrnn/registry/methods.h>\n#include <vector>\n',
        "baselines/src/full.cpp": '#include "lib/problem.h"\n',  # experiments -> up
        "experiments/lib/problem.h": '#include "vlrnn/verify/x.h"\n',
        # Two headers of one folder including each other.
        "vlrnn/include/vlrnn/schedule/planner.h": '#include "vlrnn/schedule/two_way.h"\n',
        "vlrnn/include/vlrnn/schedule/two_way.h": '#include "vlrnn/schedule/planner.h"\n',
    }
    with tempfile.TemporaryDirectory() as root:
        for relative, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, relative)), exist_ok=True)
            with open(os.path.join(root, relative), "w") as f:
                f.write(text)
        found = violations(root) + include_cycles(root)
    expected = ["vlrnn/src/core/models.cpp", "vlrnn/include/vlrnn/methods/method.h",
                "baselines/src/full.cpp", "vlrnn/src/methods/vlrnn.cpp",
                "vlrnn/src/measure/flops.cpp", "vlrnn/include/vlrnn/extra/x.h",
                "vlrnn/schedule/planner.h -> vlrnn/schedule/two_way.h -> vlrnn/schedule/planner.h"]
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
    cycles = include_cycles(os.path.abspath(root))
    for line in found + [f"include cycle: {c}" for c in cycles]:
        print(line)
    print(f"layers {' < '.join(l + '/' for l in LAYERS)}; inside vlrnn/ "
          f"{' < '.join(f + '/' for f in ENGINE_FOLDERS)}: {len(found)} upward include(s), "
          f"{len(cycles)} include cycle(s)")
    return 1 if found or cycles else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
