"""Reading Google Benchmark JSON (used by scripts/bench_to_records.py)."""
import json
import re

ANY = re.compile(r".*")  # every run name


def iterations(path, name, clock="real"):
    """Yields (match, seconds, record) for every iteration record of the benchmark JSON file
    at `path` whose run_name matches the regex `name`; seconds from the `clock`_time field."""
    with open(path) as f:
        bench = json.load(f)
    for b in bench["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        m = name.match(b["run_name"])
        if not m:
            continue
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        yield m, b[f"{clock}_time"] * scale, b


def context(path):
    """The benchmark file's context (machine, custom context entries)."""
    with open(path) as f:
        return json.load(f)["context"]
