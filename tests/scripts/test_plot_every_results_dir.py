#!/usr/bin/env python3
"""ctest plot.every_results_dir: scripts/plot.py draws every committed result folder, and
every figure it draws keeps its text on the canvas and its legends off the data.

    /usr/bin/python3 tests/scripts/test_plot_every_results_dir.py SOURCE_DIR

Copies the records and meta.json of each folder under results/ that holds results.jsonl (every
top-level folder must) into a temporary folder, so the committed figures are never rewritten,
runs plot.py's main() there (two at a time, in two worker processes that import it once) and
checks that it exits 0, writes a non-empty PNG and PDF for every figure it names, and writes
the same set of figures as the folder has committed (a committed figure plot.py no longer
draws, or one it draws that was not committed, is stale). Every folder must pass the results
schema (scripts/results_schema.py: plot.py reads it with no fallback for older key names). Then
draws two made-up copies of the committed sweep and budget folders, one from a dirty tree and
one from code of unknown state, whose footers say so, and the two targets of the layout checks
(tests/scripts/figure_layout.py), which check every figure drawn as it is saved: one drawing
serves both. The layout checks must first catch a figure made wrong on purpose. Also checks
that docs/results.md's table of committed result sets names each folder with the command its
meta.json records, and the spread and interval helpers against hand-computed values.
"""
import concurrent.futures
import json
import multiprocessing
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))
import results_schema  # noqa: E402  where a folder's records are
import figure_layout  # noqa: E402  tests/scripts/: the checks of every figure drawn


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


def drawing_targets(source, results, folders, scratch):
    """(name, path) of what is drawn: copies of the committed folders and of the made-up
    ones, the compare sample and the made-up planner sweep."""
    made_up = other_tree_states(results, scratch)
    targets = [(f, copy_of(results, f, scratch)) for f in folders]
    targets += [(f, copy_of(scratch, f, scratch)) for f in made_up]
    sample = os.path.join(scratch, "compare.json")
    shutil.copy(os.path.join(source, "tests", "scripts", "data", "compare.json"), sample)
    targets.append(("compare.json", sample))
    targets.append((figure_layout.PLANNER_SWEEP, figure_layout.planner_sweep(source, scratch)))
    return targets


def folder_problems(results, folder, copy):
    """What is wrong with the figures plot.py wrote into `copy` for result folder `folder`
    (main() reports a target with no figure at all)."""
    figures = os.path.join(copy, "figures")
    drawn = sorted(f[:-4] for f in os.listdir(figures) if f.endswith(".png")) \
        if os.path.isdir(figures) else []
    problems = []
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
    return problems


def main(source):
    scripts = os.path.join(source, "scripts")
    check_stats(scripts)
    results = os.path.join(source, "results")
    folders = result_folders(results)
    assert folders, f"no result folders under {results}"
    failures = check_results_table(source, results, folders) + check_schema(scripts, results, folders)
    checked = 0
    with tempfile.TemporaryDirectory() as scratch:
        failures += figure_layout.checks_catch_a_bad_figure(scratch)
        targets = drawing_targets(source, results, folders, scratch)
        # fork: each worker imports plot.py once and draws its share of the targets.
        context = multiprocessing.get_context("fork")
        with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as pool:
            jobs = [(name, path, pool.submit(figure_layout.draw_and_check, path))
                    for name, path in targets]
            for name, path, job in jobs:
                code, output, figures, problems, labels, seconds = job.result()
                checked += len(figures)
                print(f"{name}: exit {code}, {len(figures)} figures checked, "
                      f"{len(problems)} layout problems, {seconds:.1f} s")
                if code != 0:
                    problems.append(f"plot.py exited {code}:\n{output}")
                elif not figures:
                    problems.append(f"plot.py drew no figure:\n{output}")
                if name == figure_layout.PLANNER_SWEEP:
                    problems += figure_layout.check_planner_sweep(labels)
                elif os.path.isdir(path):
                    problems += folder_problems(results, name, path)
                failures += [f"{name}: {p}" for p in problems]
    for failure in failures:
        print("FAILED " + failure)
    print(f"{len(folders)} result folders, {checked} figures checked, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
