#!/usr/bin/env python3
"""scripts/cost_term_ablation.py end to end on the small simulator test: the model as measured
passes it, zeroing a term it needs (one-step tapes after the first, on a variable-length batch)
fails it and the table says so, and a term that is no term of the model is refused by name.
Also: the script's list of terms is CostModel's (for_each_field in cost_model.h), less the
batch's active counts and the source."""
import importlib.util
import re
import subprocess
import sys

root, binary = sys.argv[1], sys.argv[2]
script = f"{root}/scripts/cost_term_ablation.py"
test = "Simulator.PredictsTheMeasuredStepPeakWithinTenPercent"


def ablation(terms):
    return subprocess.run([sys.executable, script, "--binary", binary, "--filter", test,
                           "--terms", terms], text=True, capture_output=True)


spec = importlib.util.spec_from_file_location("cost_term_ablation", script)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
header = open(f"{root}/vlrnn/include/vlrnn/schedule/cost_model.h").read()
fields = set(re.findall(r'visit\("([\w.]+)", m\.', header)) - {"active_sequences", "source"}
listed = {name for terms in module.TERMS for name in terms.split(",")}
assert fields and listed == fields, (sorted(fields - listed), sorted(listed - fields))

out = ablation("backward.later_bytes")
assert out.returncode == 0, out.stderr
rows = {line.split(" | ")[0].strip("| `"): line for line in out.stdout.splitlines()}
assert "| none |" in rows["nothing (as measured)"], out.stdout
assert "PredictsTheMeasuredStepPeakWithinTenPercent" in rows["backward.later_bytes"], out.stdout

out = ablation("no_such_term")
assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
assert "got 'no_such_term'" in out.stderr, out.stderr
print("ok")
