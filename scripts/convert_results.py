#!/usr/bin/env python3
"""Converts result sets of schema 1 and 2 (before schema_version 3) to the results schema.

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
Schema 2 -> 3 (one key per fact, and the block options that say what they are):
  records and meta hidden, hidden_size -> H; max_abs_diff, max_rel_diff, worst_tensor ->
          max_abs, max_rel, worst; seconds -> time_s; wall_s -> clock_s (the training clock),
          where the checker looks (results_schema.META_NESTED and RECORD_NESTED), never in a
          config as the command read it
  specs   every string's method spec, vlrnn:block=K -> vlrnn:block_length=K and
          vlrnn:blocks=N -> vlrnn:num_blocks=N (bivlrnn too): methods, keys, reruns, commands
  config  a sweep config's "block" list -> "block_length" and its block_options templates
          (block={K} -> block_length={K}), with config_hash computed again as `vlrnn sweep`
          does (FNV-1a of the name and the config), so `vlrnn merge` still accepts the folder
results.csv keeps its rows: only its header's renamed columns change. A folder's records
compressed as results.jsonl.gz are read and written compressed (gzip -9, no name or time).
"""
import gzip
import re
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


# Schema 3's renames: RENAMED's entries that are plain keys (not schema 1's paths).
V3_RENAMES = {"hidden": "H", "hidden_size": "H", "max_abs_diff": "max_abs",
              "max_rel_diff": "max_rel", "worst_tensor": "worst", "seconds": "time_s",
              "wall_s": "clock_s"}
SPEC_OPTIONS = [(re.compile(r"(vlrnn:)block="), r"\1block_length="),
                (re.compile(r"(vlrnn:)blocks="), r"\1num_blocks=")]
TEMPLATE_OPTIONS = [(re.compile(r"^block="), "block_length="), (re.compile(r"^blocks="), "num_blocks=")]


def rename(mapping, old, new):
    """`old` -> `new` in `mapping`, in its place among the keys (a C++ writer's sorted keys stay
    where they were, a Python writer's order too)."""
    if old in mapping:
        assert new not in mapping or mapping[new] == mapping[old], (old, new, mapping)
        items = [(new if key == old else key, value) for key, value in mapping.items()
                 if key != new]
        mapping.clear()
        mapping.update(items)


def convert_specs(value):
    """`value` with every string's (and key's) old block options spelled as now."""
    if isinstance(value, str):
        for pattern, new in SPEC_OPTIONS:
            value = pattern.sub(new, value)
        return value
    if isinstance(value, list):
        return [convert_specs(v) for v in value]
    if isinstance(value, dict):
        return {convert_specs(k): convert_specs(v) for k, v in value.items()}
    return value


def rename_v3(holder, nested):
    """Schema 3's renames in `holder` and in its objects named in `nested`, as
    results_schema._renamed looks at them."""
    if not isinstance(holder, dict):
        return
    for old, new in V3_RENAMES.items():
        rename(holder, old, new)
    for key in nested:
        entries = holder.get(key)
        for entry in entries if isinstance(entries, list) else [entries]:
            rename_v3(entry, nested)


def config_hash(name, config):
    """config_hash in experiments/lib/sweep_config.cpp: FNV-1a 64 of the name, a newline and
    the config as nlohmann::json dumps it (keys sorted, no spaces)."""
    text = name + "\n" + json.dumps(config, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False)
    value = 14695981039346656037
    for byte in text.encode():
        value = ((value ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


def convert_sweep_config(config):
    """A sweep config of schema 2: "block" -> "block_length" and block_options' templates."""
    if not isinstance(config, dict):
        return config
    for holder in [config] + [e for e in config.get("experiments", []) if isinstance(e, dict)]:
        rename(holder, "block", "block_length")
    options = config.get("block_options")
    if isinstance(options, dict):
        for method, template in options.items():
            for pattern, new in TEMPLATE_OPTIONS:
                template = pattern.sub(new, template)
            options[method] = template
    return config


def convert_meta(meta):
    """The meta of schema 1 or 2 in the current schema (also the entries of merged_from and
    previous_runs, which copy meta fields)."""
    if "config" in meta and "config_hash" in meta:  # the hash we recompute is the one we read
        assert meta["config_hash"] == config_hash(meta.get("config_name", ""), meta["config"]), \
            "config_hash does not match the config"
    meta = convert_specs(dict(meta))
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
    rename_v3(meta, ("problem", "verify"))
    if "config" in meta and "config_hash" in meta:  # a sweep's (a train config has no hash)
        name = meta.get("config_name", "")
        meta["config"] = convert_sweep_config(meta["config"])
        meta["config_hash"] = config_hash(name, meta["config"])
    elif isinstance(meta.get("config"), dict) and "experiments" in meta["config"]:
        meta["config"] = convert_sweep_config(meta["config"])
    return meta


def convert_record(record):
    record = convert_specs(json.loads(json.dumps(record)))
    for holder in (record, record.get("run")):
        if isinstance(holder, dict) and isinstance(holder.get("memory"), dict):
            rename(holder["memory"], "step_peak_bytes", "iteration_peak_bytes")
    if "time_samples" in record:  # a Python peer
        samples = record.pop("time_samples")
        record["time_s"] = {"samples": len(samples), "median": record.pop("time_median"),
                            "min": record.pop("time_min"), "max": record.pop("time_max"),
                            "samples_s": samples}
    rename_v3(record, results_schema.RECORD_NESTED)
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


def write_gzip(path, text):
    """`text` compressed as `gzip -9n` would: no file name, no time, so the bytes depend on
    the text alone."""
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", compresslevel=9,
                                                fileobj=raw, mtime=0) as f:
        f.write(text.encode())


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
    records_file = results_schema.records_path(directory)
    with results_schema.open_records(records_file) as f:
        lines = [line for line in f if line.strip()]
    records = [json.loads(line) for line in lines]
    converted = [convert_record(r) for r in records]
    if converted != records:
        # Records the converter changed are written again; the others keep their bytes.
        out = []
        for line, old, new in zip(lines, records, converted):
            # In the style the line was written in (C++: compact, keys sorted; Python: spaced).
            compact = (",", ":") if '": ' not in line else None
            out.append(line if old == new else
                       json.dumps(new, separators=compact, sort_keys=bool(compact)) + "\n")
        if records_file.endswith(".gz"):
            write_gzip(records_file, "".join(out))
        else:
            with open(records_file, "w") as f:
                f.write("".join(out))
    csv = os.path.join(directory, "results.csv")
    if os.path.exists(csv):
        convert_csv_header(csv, {"memory.step_peak_bytes": "memory.iteration_peak_bytes",
                                 **V3_RENAMES})
    return True


def convert_file(path):
    with open(path) as f:
        document = json.load(f)
    if "meta" not in document:
        converted = convert_compare(document)
    elif document["meta"].get("schema_version") != results_schema.SCHEMA_VERSION:
        meta = dict(convert_meta(document["meta"]), schema_version=results_schema.SCHEMA_VERSION)
        converted = {"meta": meta, "records": [convert_record(r) for r in document["records"]]}
    else:
        return False
    with open(path, "w") as f:
        json.dump(converted, f, indent=2)
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
