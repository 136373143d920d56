#!/usr/bin/env python3
"""ctest plot.figure_lists: one list of sweep figures. The names a sweep config's "figures"
may give (kFigures in experiments/lib/sweep_config.cpp, which `vlrnn sweep` checks) are the
figures scripts/plot.py draws for a sweep (sweep.FIGURES), in the same order, and the ones
plot.py's help lists.

    python3 tests/scripts/test_figure_lists.py SOURCE_DIR
"""
import os
import re
import sys


def cpp_figures(source):
    with open(os.path.join(source, "experiments", "lib", "sweep_config.cpp")) as f:
        text = f.read()
    match = re.search(r"kFigures\s*=\s*\{([^}]*)\}", text)
    assert match, "experiments/lib/sweep_config.cpp: no kFigures = {...} list"
    return re.findall(r'"([^"]+)"', match.group(1))


def main(source):
    scripts = os.path.join(source, "scripts")
    sys.path.insert(0, scripts)
    from vlrnn_plots import sweep
    import plot
    in_cpp, in_python = cpp_figures(source), list(sweep.FIGURES)
    problems = []
    if in_cpp != in_python:
        problems.append(f"kFigures (experiments/lib/sweep_config.cpp) {in_cpp} != sweep.FIGURES "
                        f"(scripts/vlrnn_plots/sweep.py) {in_python}")
    listed = re.search(r"sweep records[^\n]*\n\s*(.*)\n", plot.__doc__)
    if not listed or [n.strip() for n in listed.group(1).split(",")] != in_python:
        problems.append(f"scripts/plot.py's help does not list the sweep figures {in_python}")
    for problem in problems:
        print("FAILED " + problem)
    print(f"{len(in_python)} sweep figures, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
