#!/usr/bin/env python3
"""Writes meta.json for a benchmark folder (scripts/bench_gru_variants.sh, bench_lstm_block.sh).

    META_COMMAND=... META_SCRIPT=... META_BLAS=... META_TORCH=... META_LOAD_BEFORE=...
    META_LOAD_AFTER=... META_JSON=... META_CLOCK=... [META_STEPS=256] [META_EXTRA='{json}']
    python3 scripts/bench_meta.py OUT/meta.json

Records the command, the git sha and whether the measured code was uncommitted (git_dirty),
LibTorch, the BLAS library and its thread settings, the machine and its load; META_EXTRA
(a JSON object) adds or overrides fields.
"""
import json
import os
import subprocess
import sys


def sh(command):
    return subprocess.run(command, shell=True, capture_output=True, text=True).stdout.strip()


env = os.environ
meta = {
    "command": env["META_COMMAND"],
    "script": env["META_SCRIPT"],
    "git_sha": sh("git rev-parse HEAD"),
    "git_dirty": bool(sh("git status --porcelain -- vlrnn experiments")),
    "libtorch": env["META_TORCH"],
    "blas": env["META_BLAS"],
    "blas_is_openblas": "openblas" in env["META_BLAS"],
    "openblas_env": {k: v for k, v in env.items() if k.startswith("OPENBLAS")},
    "nproc": int(sh("nproc") or 0),
    "cpu": sh("lscpu | sed -n 's/^Model name: *//p'"),
    "loadavg_before": env["META_LOAD_BEFORE"],
    "loadavg_after": env["META_LOAD_AFTER"],
    "date_utc": sh("date -u +%Y-%m-%dT%H:%M:%SZ"),
    "benchmark_json": env["META_JSON"],
    "dtype": "float32",
    "steps": int(env.get("META_STEPS", "256")),
    "clock": env["META_CLOCK"],
    # Thread settings given on the command line, shown in the figures' captions.
    "env": {k: env[k] for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS") if k in env},
}
meta.update(json.loads(env.get("META_EXTRA", "{}")))
with open(sys.argv[1], "w") as f:
    json.dump(meta, f, indent=2)
