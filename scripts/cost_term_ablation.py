#!/usr/bin/env python3
"""What each term of the planner's cost model buys (NOTE [ What each term buys ] in
tests/schedule/test_schedule.cpp): runs the simulator's accuracy tests once as measured and
once per term with that term zeroed (VLRNN_ABLATE_COST_TERMS), and prints a Markdown table:
which tests fail without it, the worst predicted-peak error, how many predictions leave 5 %,
how far the term moves a prediction, and how many predicted times stay within 15 %.

    scripts/cost_term_ablation.py                       # every term, Simulator.* (~15 min)
    scripts/cost_term_ablation.py --terms backward.sums_bytes,backward.later_bytes
    scripts/cost_term_ablation.py --filter 'Simulator.PredictsTheMeasuredStepPeakWithinTenPercent'

Peaks are exact bytes (the same on any machine with the same LibTorch); times are measured and
move from run to run by several percent.
"""
import argparse
import os
import re
import subprocess
import sys

# Every numeric term of CostModel (for_each_field in cost_model.h, less the batch's active
# counts and the source); terms that only mean something together are zeroed together.
TERMS = [
    "step.forward_seconds", "step.forward_grad_seconds", "step.backward_seconds",
    "step.tape_bytes", "step.backward_transient_bytes", "step.advance_transient_bytes",
    "step.state_bytes",
    "call.op_seconds", "call.ended_seconds", "call.tape_growth_seconds",
    "call.advance_op_bytes", "call.kept_tape_bytes",
    "backward.sums_bytes", "backward.later_bytes", "backward.floor_bytes",
    "backward.head_step_bytes", "backward.splits_at_ends",
    "backward.window_steps,backward.window_step_bytes",
    "iteration.fixed_bytes,iteration.fixed_step_bytes,iteration.reversal_bytes",
    "iteration.fixed_step_bytes", "iteration.reversal_bytes", "iteration.gradient_bytes",
]
DEFAULT_FILTER = "Simulator.*"
PREDICTION = re.compile(
    r"^\[simulator\] (?P<case>.*?): peak predicted (?P<predicted>\d+) measured (?P<measured>\d+) "
    r"\((?P<peak>[+-][\d.]+)%\); time predicted [\d.]+ s measured [\d.]+ s \((?P<time>[+-]?\d+)%")
FAILED = re.compile(r"^\[  FAILED  \] (\S+) \(")


def fail(message):
    print(f"cost_term_ablation: {message}", file=sys.stderr)
    sys.exit(2)


def run(binary, test_filter, terms):
    """(predictions {case: (peak %, time %)}, failed test names) of one run."""
    env = dict(os.environ, VLRNN_CACHE_DIR="off")
    env.pop("VLRNN_ABLATE_COST_TERMS", None)
    if terms:
        env["VLRNN_ABLATE_COST_TERMS"] = terms
    out = subprocess.run([binary, f"--gtest_filter={test_filter}"], env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout
    predictions, failed, seen = {}, [], {}
    for line in out.splitlines():
        match = PREDICTION.match(line)
        if match:
            # A case printed twice (a test measuring two problems of one label) keeps both.
            case = match["case"]
            seen[case] = seen.get(case, 0) + 1
            key = case if seen[case] == 1 else f"{case} #{seen[case]}"
            predictions[key] = (float(match["peak"]), int(match["time"]))
        failure = FAILED.match(line)
        if failure and failure[1] not in failed:
            failed.append(failure[1])
    if not predictions:
        # A model without the term may not be a model (check() refuses it): say why.
        refused = re.search(r'C\+\+ exception with description "([^\n"]*)', out)
        if terms and refused:
            return {}, [f"none ran: {refused[1]}"]
        fail(f"no predictions in the output of {binary} --gtest_filter={test_filter} "
             f"(terms: {terms or 'none'}):\n{out[-2000:]}")
    return predictions, failed


def row(name, predictions, failed, baseline):
    if not predictions:
        return f"| {name} | {failed[0]} | | | | |"
    worst_case, (worst, _) = max(predictions.items(), key=lambda kv: abs(kv[1][0]))
    beyond = sum(1 for peak, _ in predictions.values() if abs(peak) > 5.0)
    times = sum(1 for _, time in predictions.values() if abs(time) <= 15)
    moves = [predictions[c][0] - baseline[c][0] for c in predictions if c in baseline]
    move = max(moves, key=abs) if moves else 0.0
    short = [t.split(".", 1)[-1] for t in failed]
    return (f"| {name} | {', '.join(short) or 'none'} | {worst:+.1f} % ({worst_case}) | "
            f"{beyond} of {len(predictions)} | {move:+.1f} points | "
            f"{times} of {len(predictions)} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default="build/tests/vlrnn_tests",
                        help="the GoogleTest binary (default: %(default)s)")
    parser.add_argument("--filter", default=DEFAULT_FILTER,
                        help="the tests to run (default: %(default)s)")
    parser.add_argument("--terms", default=None,
                        help="terms to zero, one run each; a run zeroes several joined by '+' "
                             "(default: every term)")
    args = parser.parse_args()
    if not os.access(args.binary, os.X_OK):
        fail(f"--binary {args.binary}: expected the GoogleTest binary, got no executable "
             f"there (build it with scripts/build.sh)")
    runs = ([t.replace("+", ",") for t in args.terms.split(",") if t]
            if args.terms else TERMS)
    known = {name for terms in TERMS for name in terms.split(",")}
    for terms in runs:
        for name in terms.split(","):
            if name not in known:
                fail(f"--terms: expected names of cost-model terms ({', '.join(sorted(known))}), "
                     f"got '{name}'")
    baseline, failed = run(args.binary, args.filter, None)
    print("| zeroed | tests failing | worst peak error | peaks beyond 5 % | largest move | "
          "times within 15 % |")
    print("|---|---|---|---|---|---|")
    print(row("nothing (as measured)", baseline, failed, baseline), flush=True)
    for terms in runs:
        predictions, failed = run(args.binary, args.filter, terms)
        print(row(f"`{terms}`", predictions, failed, baseline), flush=True)


if __name__ == "__main__":
    main()
