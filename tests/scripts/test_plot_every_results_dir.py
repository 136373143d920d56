#!/usr/bin/env python3
"""ctest plot.every_results_dir: scripts/plot.py draws every committed result folder.

    /usr/bin/python3 tests/scripts/test_plot_every_results_dir.py SOURCE_DIR

Copies the records and meta.json of each folder under results/ that holds results.jsonl (every
top-level folder must) into a temporary folder, so the committed figures are never rewritten,
runs plot.py's main() there (two at a time, in two worker processes that import it once) and
checks that it exits 0, writes a non-empty PNG and PDF for every figure it names, and writes
the same set of figures as the folder has committed (a committed figure plot.py no longer
draws, or one it draws that was not committed, is stale). Every folder must pass the results
schema (scripts/results_schema.py: plot.py reads it with no fallback for older key names). Then
draws two made-up copies of the committed sweep and budget folders, one from a dirty tree and
one from code of unknown state, whose footers say so. Also checks that docs/results.md's table
of committed result sets names each folder with the command its meta.json records, and the
spread and interval helpers against hand-computed values.
"""
import concurrent.futures
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))
import results_schema  # noqa: E402  where a folder's records are


def check_stats(scripts):
    sys.path.insert(0, scripts)
    from vlrnn_plots import stats
    s = stats.summarize([4.0, 1.0, 3.0, 2.0])  # measure::summarize interpolates the same way
    assert (s["median"], s["q1"], s["q3"], s["min"], s["max"]) == (2.5, 1.75, 3.25, 1.0, 4.0), s
    assert stats.spread(s)[2] == "min-max"  # 4 repeats: too few for quartiles
    assert stats.spread(stats.summarize([1.0, 2, 3, 4, 5]))[:2] == (2.0, 4.0)
    assert stats.is_noisy(1.0, None) and stats.is_noisy(1.0, [0.85, 1.05])
    assert not stats.is_noisy(1.0, [0.95, 1.08])
    ci = stats.paired_ratio_ci([2.0, 2.1, 1.9, 2.0, 2.05], [1.0, 1.0, 1.0, 1.0, 1.0])
    assert 1.9 <= ci[0] <= 2.0 <= ci[1] <= 2.1, ci
    assert stats.paired_ratio_ci([1.0], [1.0]) is None


def result_folders(results):
    folders = []
    for top in sorted(os.listdir(results)):
        path = os.path.join(results, top)
        if not os.path.isdir(path) or top.startswith("local-"):
            continue
        assert results_schema.records_path(path), \
            f"{path}: no results.jsonl, so `python3 scripts/plot.py {path}` cannot draw it"
        for here, dirs, files in os.walk(path):
            # previous/: where a rerun moves the records it replaces (ResultsStore); never
            # committed, not a result set.
            dirs[:] = [d for d in dirs if d != "previous"]
            if any(name in files for name in results_schema.RECORDS_FILES):
                folders.append(os.path.relpath(here, results))
    return folders


def check_results_table(source, results, folders):
    """docs/results.md has a row `| `results/FOLDER` | PYTORCH | `COMMAND` ...` per folder,
    PYTORCH (major.minor) and COMMAND from its meta.json: a re-measured folder whose command
    or PyTorch changed must update the table, and no figure hides what it was measured on."""
    with open(os.path.join(source, "docs", "results.md")) as f:
        rows = [line for line in f if line.startswith("| `results/")]
    problems = []
    for folder in folders:
        meta_path = os.path.join(results, folder, "meta.json")
        if not os.path.exists(meta_path):
            continue
        with open(meta_path) as f:
            meta = json.load(f)
        env = " ".join(f"{k}={v}" for k, v in sorted((meta.get("env") or {}).items()))
        command = ((env + " " if env else "") + meta["command"]).replace("|", "\\|")
        torch_version = ".".join(meta["libtorch_version"].split("+")[0].split(".")[:2])
        name = f"| `results/{folder}` | {torch_version} |"
        if not any(row.startswith(name) and f"`{command}`" in row for row in rows):
            problems.append(f"{folder}: docs/results.md has no row `{name} `{command}` |` "
                            f"(the PyTorch and the command in its meta.json)")
    return problems


def other_tree_states(results, scratch):
    """Made-up copies of the committed sweep and budget folders measured from a dirty tree
    and from code of unknown state; returns their folder names under `scratch`."""
    names = []
    for folder, sha, dirty in (("cpu-quick", None, True), ("cpu-budget", "unknown", "unknown")):
        if not os.path.exists(os.path.join(results, folder, "results.jsonl")):
            continue
        name = f"tree-{json.dumps(dirty).strip(chr(34))}-{folder}"
        os.makedirs(os.path.join(scratch, name))
        shutil.copy(os.path.join(results, folder, "results.jsonl"), os.path.join(scratch, name))
        with open(os.path.join(results, folder, "meta.json")) as f:
            meta = json.load(f)
        meta["git_dirty"] = dirty
        meta["git_sha"] = sha or meta["git_sha"]
        with open(os.path.join(scratch, name, "meta.json"), "w") as f:
            json.dump(meta, f)
        names.append(name)
    return names


def check_schema(scripts, results, folders):
    """Every committed folder holds the results schema (scripts/results_schema.py)."""
    sys.path.insert(0, scripts)
    import results_schema
    return [p for folder in folders for p in results_schema.check(os.path.join(results, folder))]


def copy_of(results, folder, scratch):
    """A folder of `scratch` holding `folder`'s records and meta.json; its path."""
    copy = os.path.join(scratch, folder.replace(os.sep, "__"))
    os.makedirs(copy, exist_ok=True)
    for name in (*results_schema.RECORDS_FILES, "meta.json"):
        if os.path.exists(os.path.join(results, folder, name)) and results != scratch:
            shutil.copy(os.path.join(results, folder, name), copy)
    return copy


def run_plot(target):
    """`python3 scripts/plot.py TARGET` as plot.py's main(), in this process (a process per
    target spent most of its time importing matplotlib): (exit code, stdout, stderr), as a
    process of its own would end: SystemExit's code, or an exception's traceback and 1."""
    import plot  # noqa: E402  scripts/plot.py, imported once per process
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = plot.main(["plot.py", target])
        except SystemExit as stop:  # as the interpreter ends on it
            if stop.code is None or isinstance(stop.code, int):
                code = stop.code or 0
            else:
                print(stop.code, file=sys.stderr)
                code = 1
        except Exception:
            traceback.print_exc()
            code = 1
    return code, out.getvalue(), err.getvalue()


def plot_copy(copy):
    """run_plot() on `copy`, timed: (exit code, stdout, stderr, seconds)."""
    start = time.time()
    return (*run_plot(copy), time.time() - start)


def main(source):
    scripts = os.path.join(source, "scripts")
    check_stats(scripts)
    results = os.path.join(source, "results")
    folders = result_folders(results)
    assert folders, f"no result folders under {results}"
    failures = check_results_table(source, results, folders) + check_schema(scripts, results, folders)
    with tempfile.TemporaryDirectory() as scratch, \
            concurrent.futures.ProcessPoolExecutor(max_workers=2) as pool:
        made_up = other_tree_states(results, scratch)
        copies = [(f, copy_of(results, f, scratch)) for f in folders]
        copies += [(f, copy_of(scratch, f, scratch)) for f in made_up]
        jobs = [(folder, copy, pool.submit(plot_copy, copy)) for folder, copy in copies]
        for folder, copy, job in jobs:
            code, stdout, stderr, seconds = job.result()
            figures = os.path.join(copy, "figures")
            drawn = sorted(f[:-4] for f in os.listdir(figures) if f.endswith(".png")) \
                if os.path.isdir(figures) else []
            print(f"{folder}: exit {code}, {len(drawn)} figures, {seconds:.1f} s")
            problems = []
            if code != 0:
                problems.append(f"plot.py exited {code}:\n{stdout}{stderr}")
            if not drawn:
                problems.append("no figure written")
            for name in drawn:
                for ext in ("png", "pdf"):
                    path = os.path.join(figures, f"{name}.{ext}")
                    if not os.path.exists(path) or os.path.getsize(path) == 0:
                        problems.append(f"{name}.{ext} missing or empty")
            committed_dir = os.path.join(results, folder, "figures")
            if os.path.isdir(committed_dir):
                committed = sorted(f[:-4] for f in os.listdir(committed_dir) if f.endswith(".png"))
                if committed != drawn:
                    problems.append(f"committed figures {committed} differ from those plot.py "
                                    f"draws now {drawn}: regenerate them with "
                                    f"`python3 scripts/plot.py results/{folder}`")
            failures += [f"{folder}: {p}" for p in problems]
    for failure in failures:
        print("FAILED " + failure)
    print(f"{len(folders)} result folders, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
