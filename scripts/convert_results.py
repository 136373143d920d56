#!/usr/bin/env python3
"""Converts result sets of schema 1 (before schema_version 2) to the results schema.

    python3 scripts/convert_results.py PATH...   # result folders, or compare --json files

Run once over the committed folders (results/*) and tests/scripts/data/compare.json; a set
already at the current schema_version is left alone. Only key names and structure change,
never a measured value (scripts/results_schema.py lists the old names and the new):
  meta    command_line, script, merge_command_line -> command (a benchmark's own command, which
          `script` ran, -> benchmark_command); loadavg_before, load_average_start ->
          load_average and loadavg_after -> load_average_end (a list of fields -> the text
          /proc/loadavg gives); cpu -> cpu_model; libtorch -> libtorch_version;
          intra_op_threads -> torch_threads; date_utc -> finished; blas as a library path ->
          {vendor, alternative, reference} (blas_is_openblas, what vendor says, dropped);
          the same inside merged_from and previous_runs; schema_version 2
  records memory.step_peak_bytes -> memory.iteration_peak_bytes; a Python peer's time_samples,
          time_median, time_min, time_max -> time_s {samples_s, median, min, max, samples}
  compare {problem, runs, command_line, ...} -> {"meta": {...}, "records": [...]}: the
          runs become records of kind "compare"; device -> devices, peak_gemm_flops_per_s ->
          peak_gemm; CPU model and cores from the device line
results.csv keeps its rows: only its header's renamed columns change.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_schema  # noqa: E402
import results_writer  # noqa: E402

META_RENAMES = {"command_line": "command", "merge_command_line": "command",
                "loadavg_before": "load_average", "load_average_start": "load_average",
                "loadavg_after": "load_average_end", "cpu": "cpu_model",
                "libtorch": "libtorch_version", "intra_op_threads": "torch_threads",
                "date_utc": "finished"}


def rename(mapping, old, new):
    if old in mapping:
        assert new not in mapping or mapping[new] == mapping[old], (old, new, mapping)
        mapping[new] = mapping.pop(old)


def convert_meta(meta):
    """The meta of schema 1 in the current schema (also the entries of merged_from and
    previous_runs, which copy meta fields)."""
    meta = dict(meta)
    if "script" in meta:  # a benchmark folder: `script` ran `command`
        meta["benchmark_command"] = meta.pop("command")
        meta["command"] = meta.pop("script")
    for old, new in META_RENAMES.items():
        rename(meta, old, new)
    for key in ("load_average", "load_average_end"):
        if isinstance(meta.get(key), list):
            meta[key] = " ".join(meta[key])
    if isinstance(meta.get("blas"), str):
        vendor = results_writer.blas(meta["blas"])
        if "blas_is_openblas" in meta:
            assert meta.pop("blas_is_openblas") == (vendor["vendor"] == "OpenBLAS"), meta
        meta["blas"] = vendor
    for key in ("merged_from", "previous_runs"):
        if key in meta:
            meta[key] = [convert_meta(entry) for entry in meta[key]]
    return meta


def convert_record(record):
    record = json.loads(json.dumps(record))
    for holder in (record, record.get("run")):
        if isinstance(holder, dict) and isinstance(holder.get("memory"), dict):
            rename(holder["memory"], "step_peak_bytes", "iteration_peak_bytes")
    if "time_samples" in record:  # a Python peer
        samples = record.pop("time_samples")
        record["time_s"] = {"samples": len(samples), "median": record.pop("time_median"),
                            "min": record.pop("time_min"), "max": record.pop("time_max"),
                            "samples_s": samples}
    return record


def convert_compare(document):
    """A compare --json file of schema 1 -> {"meta", "records"}."""
    old = dict(document)
    runs = old.pop("runs")
    problem = old["problem"]
    device = old.pop("device", None)
    blas_vendor = old.pop("blas", None)  # schema 1's compare: the vendor's name, no path
    meta = convert_meta(old)
    if blas_vendor:
        meta["blas"] = {"vendor": blas_vendor}
    if device:
        # describe_device's line: "cpu: MODEL, N cores, T threads"
        meta["devices"] = {problem["device"]: device}
        parts = device.split(": ", 1)[-1].split(", ")
        meta.setdefault("cpu_model", parts[0])
        cores = [p for p in parts if p.endswith(" cores")]
        if cores:
            meta.setdefault("nproc", int(cores[0].split()[0]))
    if "peak_gemm_flops_per_s" in meta:
        key = f"{problem['device']}/{problem['dtype']}"
        meta["peak_gemm"] = {key: {"flops_per_s": meta.pop("peak_gemm_flops_per_s")}}
    meta.setdefault("libtorch_version", "unknown")  # not recorded by schema 1's compare
    meta["schema_version"] = results_schema.SCHEMA_VERSION
    records = [dict(convert_record(run), kind="compare") for run in runs]
    return {"meta": meta, "records": records}


def convert_csv_header(path, renames):
    with open(path) as f:
        header, rest = f.read().split("\n", 1)
    columns = header.split(",")
    columns = [renames.get(c, c) for c in columns]
    with open(path, "w") as f:
        f.write(",".join(columns) + "\n" + rest)


def convert_folder(directory):
    meta_path = os.path.join(directory, "meta.json")
    with open(meta_path) as f:
        meta = json.load(f)
    if meta.get("schema_version") == results_schema.SCHEMA_VERSION:
        return False
    meta = convert_meta(meta)
    meta["schema_version"] = results_schema.SCHEMA_VERSION
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    jsonl = os.path.join(directory, "results.jsonl")
    with open(jsonl) as f:
        lines = [line for line in f if line.strip()]
    records = [json.loads(line) for line in lines]
    converted = [convert_record(r) for r in records]
    if converted != records:
        # Records the converter changed are written again; the others keep their bytes.
        with open(jsonl, "w") as f:
            for line, old, new in zip(lines, records, converted):
                # In the style the line was written in (C++: compact; Python: spaced).
                compact = (",", ":") if '": ' not in line else None
                f.write(line if old == new else json.dumps(new, separators=compact) + "\n")
    csv = os.path.join(directory, "results.csv")
    if os.path.exists(csv):
        convert_csv_header(csv, {"memory.step_peak_bytes": "memory.iteration_peak_bytes"})
    return True


def convert_file(path):
    with open(path) as f:
        document = json.load(f)
    if "meta" in document:
        return False
    with open(path, "w") as f:
        json.dump(convert_compare(document), f, indent=2)
        f.write("\n")
    return True


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) == 2 else 2
    failed = 0
    for path in argv[1:]:
        changed = convert_folder(path) if os.path.isdir(path) else convert_file(path)
        problems = results_schema.check(path)
        print(f"{path}: {'converted' if changed else 'already current'}, "
              f"{len(problems)} schema problems")
        for problem in problems[:10]:
            print("  " + problem)
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
