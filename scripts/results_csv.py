#!/usr/bin/env python3
"""A result folder's results.csv, derived from its records (one row a record, nested
keys flattened as a.b, lists and booleans as JSON): committed folders keep their records
once, as results.jsonl, and the CSV is made when someone wants it.

    python3 scripts/results_csv.py DIR...          # writes DIR/results.csv for each DIR
    python3 scripts/results_csv.py DIR --stdout    # prints it instead

Exit 2 on a folder without records (results.jsonl, or results.jsonl.gz) or meta.json.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_schema  # noqa: E402  the one reader of a folder's records
from bench_to_records import to_csv, write_atomically  # noqa: E402  the one flattening


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="result folders")
    parser.add_argument("--stdout", action="store_true",
                        help="print the CSV (of one folder) instead of writing DIR/results.csv")
    args = parser.parse_args()
    if args.stdout and len(args.dirs) != 1:
        parser.error("--stdout: expected one DIR, got %d" % len(args.dirs))
    for directory in args.dirs:
        try:
            text = to_csv(results_schema.load(directory)[1])
        except (OSError, ValueError) as error:
            print(f"results_csv.py: {error}", file=sys.stderr)
            sys.exit(2)
        if args.stdout:
            sys.stdout.write(text)
        else:
            write_atomically(os.path.join(directory, "results.csv"), text)
            print(f"{directory}/results.csv: {text.count(chr(10)) - 1} rows")


if __name__ == "__main__":
    main()
