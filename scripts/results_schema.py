#!/usr/bin/env python3
"""The results schema: what a result set's meta and records hold, one key per fact.

    python3 scripts/results_schema.py PATH...   # a result folder, or a compare/verify --json file

Prints every problem and exits 1 if there is one. A result set is a folder (meta.json +
results.jsonl, written by experiments/lib/results_store.cpp or, for the Python benchmarks,
by scripts/results_writer.py) or one file {"meta": ..., "records": [...]} (`vlrnn compare
--json`, `vlrnn verify --json`). docs/architecture.md ("The results schema") describes it; this
module is the definition the tests check every command's output against.

A spec maps a key to its type: "str", "int", "number", "bool", "list", "object", "null",
alternatives joined by "|" ("str|null"), "dirty" (true, false or "unknown"), "timing" (a time
summary: median, samples and samples_s, the repeats in the order they ran, in seconds), or a
nested spec (a dict) for an object whose keys are checked too. Keys a spec does not name are
allowed (commands add their own fields); the keys in RENAMED never are (in a meta, its
merged_from and previous_runs entries, problem and verify; in a record, its run, memory,
problem, error_vs_full, plan, chosen and predicted; a config, as the command read it, keeps
its own keys).
"""
import gzip
import json
import os
import sys

SCHEMA_VERSION = 3

# Old names of one fact (schema 1, then 2) and the one name each has now.
RENAMED = {
    "command_line": "command", "script": "command", "merge_command_line": "command",
    "loadavg_before": "load_average", "load_average_start": "load_average",
    "loadavg_after": "load_average_end",
    "cpu": "cpu_model", "libtorch": "libtorch_version", "intra_op_threads": "torch_threads",
    "date_utc": "finished", "blas_is_openblas": "blas.vendor", "blas_library": "blas.loaded",
    "step_peak_bytes": "iteration_peak_bytes",
    "time_samples": "time_s.samples_s", "time_median": "time_s.median",
    "time_min": "time_s.min", "time_max": "time_s.max", "runs": "records",
    # schema 3: the hidden size is H (as T, B and F), wherever a record or problem holds it;
    # a difference from full BPTT is max_abs / max_rel / worst, as error_vs_full names them;
    # a time in seconds is time_s, and the training clock (the seconds of the steps so far,
    # not a wall clock: evaluations and a kill's lost time are not counted) is clock_s.
    "hidden": "H", "hidden_size": "H",
    "max_abs_diff": "max_abs", "max_rel_diff": "max_rel", "worst_tensor": "worst",
    "seconds": "time_s", "wall_s": "clock_s",
}

META = {
    "schema_version": "int",
    "command": "str",            # the command line that wrote the set
    "git_sha": "str",            # the commit the code was built from, or "unknown"
    "git_dirty": "dirty",        # uncommitted changes in it: true, false or "unknown"
    "libtorch_version": "str",
    "blas": {"vendor": "str"},   # + loaded, alternative (paths), reference (bool)
    "nproc": "int",
    "cpu_model": "str",
    "load_average": "str",       # /proc/loadavg's first three fields as the run started
}
META_OPTIONAL = {
    "load_average_end": "str", "started": "str", "finished": "str|null", "host": "str",
    "torch_threads": "int|str", "blas_threads": "int", "methods_in_registry": "list",
    "env": "object", "devices": "object", "peak_gemm": "object", "status": "str",
    "config_path": "str", "config_name": "str", "problem": "object",
}

MEMORY = {"iteration_peak_bytes": "int"}
MEASURED_RUN = {"status": "str", "method": "str"}
MEASURED_RUN_OK = {"time_s": "timing", "memory": MEMORY}
SWEEP = {"key": "str", "experiment": "str", "method": "str", "status": "str"}
# Per record kind: the keys every record of it has, and those an "ok" one adds (a budget
# "measured" record: its run).
RECORDS = {
    "grid": (SWEEP, MEASURED_RUN_OK),
    "max_batch": (SWEEP, MEASURED_RUN_OK),
    "compare": ({"method": "str", "status": "str"}, MEASURED_RUN_OK),
    "measured": ({"key": "str", "T": "int", "method": "str", "budget_bytes": "int",
                  "full_peak_bytes": "int", "run": MEASURED_RUN}, MEASURED_RUN_OK),
    "theory": ({"key": "str", "T": "int", "method": "str", "full_peak_bytes": "int"}, {}),
    "does_not_fit": ({"key": "str", "T": "int", "method": "str", "budget_bytes": "int"}, {}),
    "bench": ({"key": "str", "program": "str", "implementation": "str", "status": "str",
               "time_s": "timing"}, {}),
    "verify": ({"key": "str", "case": "str", "method": "str", "passed": "bool",
                "exact": "bool"}, {}),
    "train_step": ({"key": "str", "run": "str", "method": "str", "step": "int",
                    "loss": "number", "time_s": "number", "iteration_peak_bytes": "int"}, {}),
    "train_run": ({"key": "str", "run": "str", "method": "str", "status": "str"}, {}),
    "python_peer": ({"experiment": "str", "peer": "str", "reference": "str",
                     "time_s": "timing", "peak_bytes": "int"}, {}),
}
# The objects of a meta and of a record whose keys are checked against RENAMED too (maps keyed
# by data, such as devices, baselines or a plan's cost_model, are not).
META_NESTED = ("merged_from", "previous_runs", "problem", "verify")
RECORD_NESTED = ("run", "memory", "problem", "error_vs_full", "plan", "chosen", "predicted")
TIMING = {"median": "number", "samples": "int", "samples_s": "list"}

TYPES = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "list": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
    "dirty": lambda v: isinstance(v, bool) or v == "unknown",
}


def _check(value, spec, where, problems):
    """Appends to `problems` what in `value` breaks `spec` (a type name or a nested spec)."""
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            problems.append(f"{where}: expected an object, got {json.dumps(value)[:60]}")
            return
        for key, sub in spec.items():
            if key not in value:
                problems.append(f"{where}: no key {key!r}")
            else:
                _check(value[key], sub, f"{where}.{key}", problems)
        return
    if spec == "timing":
        _check(value, TIMING, where, problems)
        if isinstance(value, dict) and isinstance(value.get("samples_s"), list) and \
                value.get("samples") != len(value["samples_s"]):
            problems.append(f"{where}: samples {value.get('samples')} but "
                            f"{len(value['samples_s'])} samples_s")
        return
    if not any(TYPES[t](value) for t in spec.split("|")):
        problems.append(f"{where}: expected {spec}, got {json.dumps(value)[:60]}")


def _renamed(value, where, problems, nested=()):
    """Old names among the keys of `value` and of its objects named in `nested` (maps keyed
    by data, such as devices or baselines, are not looked into)."""
    if not isinstance(value, dict):
        return
    for key in value:
        if key in RENAMED:
            problems.append(f"{where}.{key}: an old name; the schema calls it {RENAMED[key]!r}")
    for key in nested:
        entries = value.get(key)
        for i, entry in enumerate(entries if isinstance(entries, list) else [entries]):
            _renamed(entry, f"{where}.{key}" + (f"[{i}]" if isinstance(entries, list) else ""),
                     problems, nested)


def check_meta(meta, where="meta"):
    problems = []
    _check(meta, META, where, problems)
    if meta.get("schema_version") != SCHEMA_VERSION:
        problems.append(f"{where}.schema_version: expected {SCHEMA_VERSION}, got "
                        f"{meta.get('schema_version')!r} (scripts/convert_results.py converts)")
    for key, spec in META_OPTIONAL.items():
        if key in meta:
            _check(meta[key], spec, f"{where}.{key}", problems)
    if meta.get("git_sha") == "unknown" and meta.get("git_dirty") is False:
        problems.append(f"{where}: git_dirty false for an unknown commit (unknown is never clean)")
    _renamed(meta, where, problems, META_NESTED)
    return problems


def check_record(record, where="record"):
    problems = []
    kind = record.get("kind") if isinstance(record, dict) else None
    if kind not in RECORDS:
        return [f"{where}: kind {kind!r} is none of {', '.join(RECORDS)}"]
    always, when_ok = RECORDS[kind]
    _check(record, always, where, problems)
    run = record.get("run") if kind == "measured" else record
    if when_ok and isinstance(run, dict) and run.get("status") == "ok":
        _check(run, when_ok, where + (".run" if kind == "measured" else ""), problems)
    _renamed(record, where, problems, RECORD_NESTED)
    return problems


# A folder's records: results.jsonl as the writers append it, or, in a large committed folder,
# compressed once (gzip -9n results.jsonl) so that the tracked tree can travel to a GPU
# machine. Every reader finds them through records_path and open_records.
RECORDS_FILES = ("results.jsonl", "results.jsonl.gz")


def records_path(directory):
    """The folder's records file (RECORDS_FILES), or None when it has none."""
    for name in RECORDS_FILES:
        if os.path.exists(os.path.join(directory, name)):
            return os.path.join(directory, name)
    return None


def open_records(path):
    """A records file opened for reading text, compressed or not."""
    return gzip.open(path, "rt") if path.endswith(".gz") else open(path)


def load(path):
    """(meta, records) of a result folder or a one-file result set."""
    if os.path.isdir(path):
        records_file = records_path(path)
        if records_file is None:
            raise FileNotFoundError(f"{path}: expected a result folder with results.jsonl (or "
                                    "results.jsonl.gz), found neither")
        with open(os.path.join(path, "meta.json")) as f:
            meta = json.load(f)
        with open_records(records_file) as f:
            records = [json.loads(line) for line in f if line.strip()]
        return meta, records
    with open(path) as f:
        document = json.load(f)
    if not isinstance(document, dict) or set(document) != {"meta", "records"}:
        raise ValueError(f"{path}: expected a result file {{\"meta\": ..., \"records\": [...]}}, "
                         f"got keys {sorted(document) if isinstance(document, dict) else '-'}")
    return document["meta"], document["records"]


def check(path):
    """Every problem of the result set at `path` (a folder or a file), as lines."""
    try:
        meta, records = load(path)
    except (OSError, ValueError) as error:
        return [str(error)]
    problems = check_meta(meta, f"{path}: meta")
    if not records:
        problems.append(f"{path}: no records")
    for i, record in enumerate(records):
        problems += check_record(record, f"{path}: record {i}")
    return problems


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) == 2 else 2
    problems = [p for path in argv[1:] for p in check(path)]
    for problem in problems[:50]:
        print(problem)
    if len(problems) > 50:
        print(f"... and {len(problems) - 50} more")
    print(f"results_schema: {len(argv) - 1} result sets, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
