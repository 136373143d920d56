"""The Python scripts' side of the one results writer (experiments/lib/results_store.cpp is
the C++ side): the meta.json fields every result set shares, with the names the results
schema gives them (scripts/results_schema.py), and meta.json written with its schema_version
after the schema has checked it. Used by scripts/bench_meta.py and scripts/bench_python.py.
"""
import json
import os
import subprocess

import results_schema

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _sh(command):
    result = subprocess.run(command, shell=True, capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else ""


def load_average():
    """/proc/loadavg's first three fields, as the C++ side records them ("" if unreadable)."""
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return ""


def blas_vendor(path):
    """The vendor of a BLAS library path, by the rule of vlrnn/src/measure/environment.cpp."""
    for word, vendor in (("openblas", "OpenBLAS"), ("blis", "BLIS"), ("mkl", "MKL"),
                         ("atlas", "ATLAS"), ("/blas/libblas", "reference")):
        if word in path:
            return vendor
    return "unknown"


def blas(alternative):
    """meta.json's blas object from the path /etc/alternatives names (a script sees no mapped
    library of its own)."""
    vendor = blas_vendor(alternative) if alternative else "unknown"
    return {"vendor": vendor, "alternative": alternative, "reference": vendor == "reference"}


def git_state(paths=(".", ":(exclude)results")):
    """(git_sha, git_dirty) of this checkout: dirty when `paths` have uncommitted changes to
    tracked files; ("unknown", "unknown") without git or outside a checkout, never clean."""
    sha = _sh(f"git -C {ROOT} rev-parse HEAD")
    if len(sha) != 40:
        return "unknown", "unknown"
    quoted = " ".join("'" + p + "'" for p in paths)
    status = subprocess.run(f"git -C {ROOT} status --porcelain --untracked-files=no -- {quoted}",
                            shell=True, capture_output=True, text=True)
    if status.returncode != 0:
        return sha, "unknown"
    return sha, bool(status.stdout.strip())


def environment(command, libtorch_version, blas_alternative, torch_threads=None):
    """The fields every meta.json shares (experiments/lib/environment.cpp's, from a script)."""
    sha, dirty = git_state()
    meta = {"command": command, "git_sha": sha, "git_dirty": dirty,
            "libtorch_version": libtorch_version, "blas": blas(blas_alternative),
            "nproc": os.cpu_count() or 0,
            "cpu_model": _sh("lscpu | sed -n 's/^Model name: *//p'") or "unknown",
            "load_average": load_average()}
    if torch_threads is not None:
        meta["torch_threads"] = torch_threads
    return meta


def write_meta(directory, meta):
    """Writes DIRECTORY/meta.json: `meta` with schema_version, refused (ValueError) if the
    schema finds a problem in it."""
    meta = dict(meta, schema_version=results_schema.SCHEMA_VERSION)
    problems = results_schema.check_meta(meta, os.path.join(directory, "meta.json"))
    if problems:
        raise ValueError("meta.json breaks the results schema:\n  " + "\n  ".join(problems))
    path = os.path.join(directory, "meta.json")
    with open(path + ".tmp", "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)
