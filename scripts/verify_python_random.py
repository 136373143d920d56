#!/usr/bin/env python3
"""The Python path against full BPTT on many random cases: the long run of
tests/python/test_random_cases.py, into a result folder.

    PYTHONPATH=build/python scripts/verify_python_random.py --cases 2000 --seed 1 \\
        --out results/python-random-2000
    PYTHONPATH=build/python scripts/verify_python_random.py --case SEED [--method LABEL]

Each case (tests/python/random_cases.py: a user's rnn module, a head, a batch, h0,
loss_scaling, fast_cells and three gradient methods, rebuilt from its own seed) runs every
method through vlrnn.VLRNN and compares the loss, per-step losses, final state and every
gradient with vlrnn.PlainRNN's, relative to each tensor's largest entry, within 1e-10
(float64). The case seeds are drawn from --seed, so the first k cases of a run are the same
for any --cases >= k.

--out DIR writes, in the results schema (scripts/results_schema.py) of `vlrnn verify
--random --out`: DIR/results.jsonl, one record of kind "verify" per (case, method), appended
and flushed as each case finishes, with passed, max_rel, the worst tensor, the case's
description and parts, and the command that reruns it; then DIR/results.csv and
DIR/meta.json (git sha and clean-tree flag of the checkout this script is in);
`python3 scripts/plot.py DIR` draws it. --case SEED reruns one case and prints its rows.
Progress goes to stderr. Exit 1 when any method of any case differs or raises.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core, as torch.set_num_threads(1)
SCRIPTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, SCRIPTS)
from system_python import require  # noqa: E402

require("torch")
import torch  # noqa: E402

import results_writer  # noqa: E402
from bench_to_records import to_csv, write_atomically  # noqa: E402

sys.path.insert(0, os.path.join(results_writer.ROOT, "tests", "python"))
import random_cases  # noqa: E402
import vlrnn  # noqa: E402

SCRIPT = "scripts/verify_python_random.py"


def rerun_command(seed, label):
    return f"PYTHONPATH=build/python {SCRIPT} --case {seed} --method '{label}'"


def record_of(case, result):
    """The schema's "verify" record of one method on one case (as `vlrnn verify` writes)."""
    diff, error = result.max_rel_diff, result.error
    if not math.isfinite(diff):  # JSON has no inf / NaN: a missing number, and why
        diff, error = None, error or f"non-finite difference at {result.worst}"
    return {
        "kind": "verify", "key": f"{case.seed}/{result.method}", "seed": case.seed,
        "case": case.description, "method": result.spec or result.method,
        "call": result.method, "model": case.parts["rnn"].split(":")[0], "exact": True,
        "passed": result.passed, "max_rel": diff, "worst": result.worst,
        "error": error, "warning": result.warning, "tolerance": random_cases.TOLERANCE, "dtype": "float64",
        **case.parts, "rerun": rerun_command(case.seed, result.method)}


def print_row(result):
    status = "ok" if result.passed else "FAILED"
    print(f"{status:6} {result.method:22} {result.spec:22} max_rel {result.max_rel_diff:.3g} "
          f"at {result.worst} {result.error}")
    if result.warning:
        print(f"       warning: {result.warning}")


def rerun(seed, label):
    case = random_cases.case_from_seed(seed)
    print(case.description)
    methods = [m for m in case.methods if label is None or m.label == label]
    if not methods:
        sys.exit(f"--method {label!r}: the case's methods are "
                 f"{[m.label for m in case.methods]}")
    results = random_cases.check_case(case, methods)
    for result in results:
        print_row(result)
    return 0 if all(r.passed for r in results) else 1


def blas_alternative():
    run = subprocess.run(["readlink", "-f", "/etc/alternatives/libblas.so.3-x86_64-linux-gnu"],
                         capture_output=True, text=True)
    return run.stdout.strip()


def long_run(args, argv):
    os.makedirs(args.out, exist_ok=True)
    meta = results_writer.environment(" ".join([SCRIPT] + argv), torch.__version__,
                                      blas_alternative(), torch.get_num_threads())
    meta.update(python=sys.executable, vlrnn_package=os.path.dirname(vlrnn.__file__),
                started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                methods_in_registry=list(vlrnn.methods()))
    start = time.time()
    records, failed_cases, worst = [], [], 0.0
    seeds = random_cases.case_seeds(args.seed, args.cases)
    with open(os.path.join(args.out, "results.jsonl"), "w") as out:
        for i, seed in enumerate(seeds, 1):
            case = random_cases.case_from_seed(seed)
            results = random_cases.check_case(case)
            for result in results:
                records.append(record_of(case, result))
                out.write(json.dumps(records[-1]) + "\n")
                if result.passed:
                    worst = max(worst, result.max_rel_diff)
            out.flush()
            if not all(r.passed for r in results):
                failed_cases.append(seed)
                print(f"FAILED {case.description}", file=sys.stderr)
                for result in results:
                    if not result.passed:
                        print(f"    {result.method}: {result.max_rel_diff:.3g} at "
                              f"{result.worst} {result.error}\n    rerun: "
                              f"{rerun_command(seed, result.method)}", file=sys.stderr)
            if i % args.progress == 0 or i == len(seeds):
                print(f"[{i}/{len(seeds)}] {len(records)} rows, {len(failed_cases)} failed "
                      f"cases, worst passing max_rel {worst:.3g}, "
                      f"{time.time() - start:.0f} s", file=sys.stderr)
    write_atomically(os.path.join(args.out, "results.csv"), to_csv(records))
    failed_rows = sum(1 for r in records if not r["passed"])
    warned_rows = sum(1 for r in records if r["warning"])
    summary = f"{len(records) - failed_rows} passed, {failed_rows} failed"
    meta.update(load_average_end=results_writer.load_average(),
                finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                verify={"cases": len(records), "failed": failed_rows,
                        "random_configurations": len(seeds), "failed_seeds": failed_cases,
                        "warned": warned_rows,
                        "max_rel": worst, "time_s": time.time() - start,
                        "seed": args.seed, "summary": summary})
    results_writer.write_meta(args.out, meta)
    print(f"{summary} ({len(seeds)} cases, worst max_rel {worst:.3g}); wrote {args.out}; "
          f"draw: python3 scripts/plot.py {args.out}")
    return 1 if failed_rows else 0


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=2000, help="random cases (default 2000)")
    parser.add_argument("--seed", type=int, default=1, help="the run's seed (default 1)")
    parser.add_argument("--out", help="result folder (created; its records replaced)")
    parser.add_argument("--case", type=int, help="rerun the case of this seed and print it")
    parser.add_argument("--method", help="with --case: only the method of this label")
    parser.add_argument("--progress", type=int, default=50, help="cases between progress lines")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # one core: the other runs the rest of the suite
    if args.case is not None:
        return rerun(args.case, args.method)
    if not args.out:
        parser.error("give --out DIR (the long run) or --case SEED (one case)")
    return long_run(args, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
