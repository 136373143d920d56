#!/usr/bin/env python3
"""Writes meta.json for a benchmark folder (scripts/bench_gru_variants.sh, bench_lstm_block.sh).

    META_COMMAND=... META_BENCHMARK_COMMAND=... META_BLAS=... META_TORCH=...
    META_LOAD_BEFORE=... META_LOAD_AFTER=... META_JSON=... META_CLOCK=... [META_STEPS=256]
    [META_EXTRA='{json}'] python3 scripts/bench_meta.py OUT/meta.json

Records, in the results schema (scripts/results_schema.py; written by scripts/results_writer.py):
the command (the script as run), the benchmark programs' command lines, the git sha and whether
the measured code was uncommitted (git_dirty), LibTorch, the BLAS library and its thread
settings, the machine and its load; META_EXTRA (a JSON object) adds or overrides fields.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_writer  # noqa: E402

env = os.environ
meta = results_writer.environment(env["META_COMMAND"], env["META_TORCH"], env["META_BLAS"])
meta.update({
    "benchmark_command": env["META_BENCHMARK_COMMAND"],
    "openblas_env": {k: v for k, v in env.items() if k.startswith("OPENBLAS")},
    "load_average": env["META_LOAD_BEFORE"],
    "load_average_end": env["META_LOAD_AFTER"],
    "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "benchmark_json": env["META_JSON"],
    "dtype": "float32",
    "steps": int(env.get("META_STEPS", "256")),
    "clock": env["META_CLOCK"],
    # Thread settings given on the command line, shown in the figures' captions.
    "env": {k: env[k] for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS") if k in env},
})
meta.update(json.loads(env.get("META_EXTRA", "{}")))
results_writer.write_meta(os.path.dirname(os.path.abspath(sys.argv[1])), meta)
