#!/usr/bin/env python3
"""Google Benchmark JSON -> the shared record schema (results.jsonl + results.csv).

    python3 scripts/bench_to_records.py DIR [BENCH.json ...]

Reads the benchmark files (default: those meta.json's "benchmark_json" names, else every
bench_*.json in DIR) and writes DIR/results.jsonl and DIR/results.csv beside DIR/meta.json:
one record (kind "bench") per benchmark, i.e. per implementation and parameter set, with
  program, benchmark (Google Benchmark's run name), implementation, label, params (H, B, ...
  from the name), T, dtype, repetitions
  time_s            the clock meta.json names ("real" wall-clock, or "cpu": the main thread's
                    CPU time): samples, median, q1, q3, min, max, mean, samples_s (every
                    repetition, in the file's order); real_time_s and cpu_time_s both kept
  flops.useful, useful_flops_per_s, gflop_per_s (useful FLOPs / median time)
  peak_gemm_flops_per_s, utilization (of the peak GEMM rate the program measured, if it did)
  memory.held_MB, memory.peak_MB  resident memory grown (least over the repetitions)
  baseline_names    the implementations compared with, the figures' first
  baselines.<implementation>      time_ratio (median / the baseline's median), speed (its
                    inverse), time_ratio_ci (95 % bootstrap, unpaired: the repetitions are
                    interleaved at random, not in rounds) and time_ratio_noisy (interval wider
                    than ±10 %, or fewer than two repetitions a side)
Prints the table. A format conversion: the measurements are the benchmark files'.
scripts/plot.py draws the records (scripts/vlrnn_plots/bench.py).
"""
import csv
import glob
import io
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_json  # noqa: E402
from vlrnn_plots import stats  # noqa: E402

# Per program: plotting order and labels of the implementations, and the baselines every
# other implementation is compared with (the first one is the figures').
PROGRAMS = {
    "bench_gru_variants": {
        "implementations": [
            ("BlockGru/v1", "GRU v1 (reset before W_hn)"),
            ("BlockGru/v2", "GRU v2 (+ grouped GEMMs)"),
            ("BlockGru/v3", "GRU v3 (reset after W_hn)"),
            ("BlockGru/v4", "GRU v4 (save at GEMMs)"),
            ("TorchGru", "LibTorch nn::GRU"),
            ("TorchGruCellLoop", "LibTorch GRUCell loop"),
        ],
        "baselines": ["BlockGru/v1", "TorchGru"],
        "flops": "forward 2·B·(F·3H + H·3H) per step, backward 2x forward, F = H",
    },
    "bench_linear_scan": {
        "implementations": [
            ("MinGru/scan", "in-block scan"),
            ("MinGru/loop", "step loop"),
        ],
        "baselines": ["MinGru/loop"],
        "flops": "the step loop's: forward 2·B·2H·F + 7·B·H per step (part model: minGRU), "
                 "2·B·H (part recurrence), backward 2x forward, F = H",
    },
    "bench_lstm_block": {
        "implementations": [
            ("LstmBlock/gates", "lstm_block (saves gates)"),
            ("LstmBlock/preactivations", "lstm_block (saves pre-activations)"),
            ("TorchLstm", "LibTorch nn::LSTM"),
            ("TorchLstmCellLoop", "LibTorch LSTMCell loop"),
        ],
        "baselines": ["TorchLstm", "TorchLstmCellLoop"],
        "flops": "forward 2·B·4H·(F + H) per step, backward 2x forward, F = H",
    },
}
# What results.csv shows first; the other columns follow, sorted.
FIRST_COLUMNS = ["kind", "program", "implementation", "H", "B", "T", "repetitions", "clock",
                 "time_s.median", "time_s.q1", "time_s.q3", "time_s.min", "time_s.max",
                 "gflop_per_s", "utilization", "memory.held_MB", "memory.peak_MB"]


def parse_name(run_name):
    """('BlockGru/v1', {'H': 512, 'B': 32}) from 'BM_BlockGru/v1/H:512/B:32/real_time'."""
    parts = run_name.split("/")
    parts[0] = parts[0][3:] if parts[0].startswith("BM_") else parts[0]
    params, impl = {}, []
    for part in parts:
        if ":" in part:
            key, value = part.split(":", 1)
            params[key] = int(value) if value.lstrip("-").isdigit() else value
        elif part not in ("real_time", "process_time", "manual_time"):
            impl.append(part)
    return "/".join(impl), params


def benchmark_files(directory, meta, given):
    if given:
        return given
    named = (meta.get("benchmark_json") or "").split()
    if named:
        return [os.path.join(directory, n) for n in named]
    return sorted(glob.glob(os.path.join(directory, "bench_*.json")))


def convert(directory, files, clock):
    """The records of every benchmark in `files`, in the program's implementation order."""
    runs = {}  # run_name -> what its iterations gave
    for path in files:
        context = bench_json.context(path)
        program = os.path.basename(context.get("executable", "")) or "benchmark"
        peak = float(context.get("peak_gemm_flops_per_s") or 0) or None
        for _, real, b in bench_json.iterations(path, bench_json.ANY, "real"):
            run = runs.setdefault(b["run_name"], {
                "program": program, "source": os.path.basename(path), "real": [], "cpu": [],
                "held": [], "peak_mb": [], "flops": b.get("GFLOP", 0.0) * 1e9, "peak": peak,
                "T": int(b["T"]) if "T" in b else int(context.get("steps", 0) or 0) or None,
                "dtype": context.get("dtype")})
            scale = real / b["real_time"] if b["real_time"] else 0.0
            run["real"].append(real)
            run["cpu"].append(b["cpu_time"] * scale)
            if "held_MB" in b:
                run["held"].append(b["held_MB"])
                run["peak_mb"].append(b["peak_MB"])
    records = []
    for run_name, run in runs.items():
        impl, params = parse_name(run_name)
        table = PROGRAMS.get(run["program"], {})
        names = [n for n, _ in table.get("implementations", [])]
        times = run[clock]
        summary = stats.summarize(times)
        rate = run["flops"] / summary["median"] if run["flops"] else None
        record = {
            "kind": "bench", "status": "ok", "key": f"{run['source']}|{run_name}",
            "program": run["program"], "source": run["source"], "benchmark": run_name,
            "implementation": impl, "label": dict(table.get("implementations", [])).get(impl, impl),
            "order": names.index(impl) if impl in names else len(names),
            "params": params, **{k: v for k, v in params.items() if k in ("H", "B", "F")},
            "T": run["T"], "dtype": run["dtype"], "clock": clock, "repetitions": len(times),
            "time_s": summary, "real_time_s": stats.summarize(run["real"]),
            "cpu_time_s": stats.summarize(run["cpu"]),
            "flops": {"useful": run["flops"], "model": table.get("flops", "")},
            "useful_flops_per_s": rate, "gflop_per_s": rate / 1e9 if rate else None,
            "peak_gemm_flops_per_s": run["peak"],
            "utilization": rate / run["peak"] if rate and run["peak"] else None,
        }
        if run["held"]:
            # Resident memory the allocator kept after a free only ever adds to a reading:
            # the least over the repetitions is the closest to what the tensors needed.
            record["memory"] = {"held_MB": min(run["held"]), "peak_MB": min(run["peak_mb"])}
        records.append(record)
    by_point = {(r["implementation"], json.dumps(r["params"], sort_keys=True)): r for r in records}
    for r in records:
        table = PROGRAMS.get(r["program"], {})
        baselines = table.get("baselines") or []
        r["baseline_names"] = [b for b in baselines]
        r["baselines"] = {}
        for base in baselines:
            other = by_point.get((base, json.dumps(r["params"], sort_keys=True)))
            if other is None:
                continue
            mine, theirs = r["time_s"]["samples_s"], other["time_s"]["samples_s"]
            value = r["time_s"]["median"] / other["time_s"]["median"]
            ci = None if other is r else stats.unpaired_ratio_ci(mine, theirs)
            r["baselines"][base] = {
                "time_ratio": value, "speed": 1.0 / value,
                "time_ratio_ci": ci if other is not r else [1.0, 1.0],
                "time_ratio_noisy": False if other is r else stats.is_noisy(value, ci)}
    records.sort(key=lambda r: (r["source"], r["order"], [str(v).zfill(12) for v in r["params"].values()]))
    return records


def flatten(value, prefix, row):
    if isinstance(value, dict):
        for key in sorted(value):
            flatten(value[key], f"{prefix}.{key}" if prefix else key, row)
    elif value is None:
        row[prefix] = ""
    elif isinstance(value, (list, bool)):
        row[prefix] = json.dumps(value, separators=(",", ":"))
    else:
        row[prefix] = str(value)


def to_csv(records):
    rows = []
    for r in records:
        row = {}
        flatten(r, "", row)
        rows.append(row)
    seen = {c for row in rows for c in row}
    columns = [c for c in FIRST_COLUMNS if c in seen]
    columns += sorted(seen - set(columns))
    out = io.StringIO()
    writer = csv.DictWriter(out, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def write_atomically(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def print_table(records):
    print(f"{'implementation':28} {'H':>5} {'B':>4} {'n':>2} {'median s':>9} {'spread s':>17} "
          f"{'GFLOP/s':>8}  speed vs baselines (95 % CI; * noisy)")
    for r in records:
        lo, hi, _ = stats.spread(r["time_s"])
        speeds = []
        for base, q in r["baselines"].items():
            if base == r["implementation"]:
                continue
            ci = q["time_ratio_ci"]
            interval = f" ({1 / ci[1]:.2f}-{1 / ci[0]:.2f})" if ci else ""
            speeds.append(f"{base} {q['speed']:.2f}{interval}{'*' if q['time_ratio_noisy'] else ''}")
        gflops = f"{r['gflop_per_s']:.1f}" if r["gflop_per_s"] else "-"
        print(f"{r['implementation']:28} {r.get('H', ''):>5} {r.get('B', ''):>4} "
              f"{r['repetitions']:>2} {r['time_s']['median']:9.4f} {lo:8.4f}-{hi:8.4f} "
              f"{gflops:>8}  {'; '.join(speeds)}")


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) == 2 else 2
    directory = argv[1]
    meta = {}
    if os.path.exists(os.path.join(directory, "meta.json")):
        with open(os.path.join(directory, "meta.json")) as f:
            meta = json.load(f)
    files = benchmark_files(directory, meta, argv[2:])
    if not files:
        sys.exit(f"bench_to_records.py: no benchmark JSON in {directory} (bench_*.json)")
    records = convert(directory, files, meta.get("clock", "real"))
    if not records:
        sys.exit(f"bench_to_records.py: no benchmark iterations in {', '.join(files)}")
    write_atomically(os.path.join(directory, "results.jsonl"),
                     "".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    write_atomically(os.path.join(directory, "results.csv"), to_csv(records))
    print_table(records)
    print(f"bench_to_records.py: {len(records)} records from {len(files)} file(s) -> "
          f"{directory}/results.jsonl, results.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
