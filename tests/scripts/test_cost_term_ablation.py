#!/usr/bin/env python3
"""scripts/cost_term_ablation.py end to end on the small simulator test: the model as measured
passes it, zeroing a term it needs (one-step tapes after the first, on a variable-length batch)
fails it and the table says so, and a term that is no term of the model is refused by name."""
import subprocess
import sys

root, binary = sys.argv[1], sys.argv[2]
script = f"{root}/scripts/cost_term_ablation.py"
test = "Simulator.PredictsTheMeasuredStepPeakWithinTenPercent"


def ablation(terms):
    return subprocess.run([sys.executable, script, "--binary", binary, "--filter", test,
                           "--terms", terms], text=True, capture_output=True)


out = ablation("accumulate_single_bytes")
assert out.returncode == 0, out.stderr
rows = {line.split(" | ")[0].strip("| `"): line for line in out.stdout.splitlines()}
assert "| none |" in rows["nothing (as measured)"], out.stdout
assert "PredictsTheMeasuredStepPeakWithinTenPercent" in rows["accumulate_single_bytes"], out.stdout

out = ablation("no_such_term")
assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
assert "got 'no_such_term'" in out.stderr, out.stderr
print("ok")
