#!/usr/bin/env python3
"""ctest scripts.results_csv: committed result folders hold no results.csv (git ignores it),
and scripts/results_csv.py derives one from any folder's records: a header, then one row per
record, every record's flattened keys among the columns.

    python3 tests/scripts/test_results_csv.py SOURCE_DIR
"""
import csv
import io
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))
import results_schema  # noqa: E402  where a folder's records are


def main(source):
    script = os.path.join(source, "scripts", "results_csv.py")
    tracked = subprocess.run(["git", "-C", source, "ls-files", "results"], check=True,
                             capture_output=True, text=True).stdout.split()
    committed_csvs = [p for p in tracked if os.path.basename(p) == "results.csv"]
    assert not committed_csvs, f"results.csv committed (derive it instead): {committed_csvs}"
    folders = sorted({os.path.dirname(p) for p in tracked
                      if p.endswith(("/results.jsonl", "/results.jsonl.gz"))})
    assert folders, "no committed result folder found"
    for folder in folders:
        directory = os.path.join(source, folder)
        out = subprocess.run([sys.executable, script, directory, "--stdout"], check=True,
                             capture_output=True, text=True).stdout
        rows = list(csv.DictReader(io.StringIO(out)))
        with results_schema.open_records(results_schema.records_path(directory)) as f:
            records = [json.loads(line) for line in f if line.strip()]
        assert len(rows) == len(records), (folder, len(rows), len(records))
        assert rows[0].get("kind", "") == str(records[0].get("kind", "")), folder
    missing = subprocess.run([sys.executable, script, os.path.join(source, "docs")],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "results.jsonl" in missing.stderr, missing
    print(f"results_csv: {len(folders)} committed folders derive their CSV; none is committed")


if __name__ == "__main__":
    main(sys.argv[1])
