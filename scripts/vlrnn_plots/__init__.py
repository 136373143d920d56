"""The figures of every VLRNN result folder, drawn by scripts/plot.py.

One module per kind of record: sweep (`vlrnn sweep`, `vlrnn merge`), budget (`vlrnn budget`),
bench (Google Benchmark programs, converted by scripts/bench_to_records.py), verify
(`vlrnn verify --out`), train (`vlrnn train`), peers (scripts/bench_python.py), and compare
(a `vlrnn compare --json` file). common holds loading, captions and styles; layout where the
footer, long texts and legends go; stats the spread and the confidence intervals (pure
Python, also used by the converter, so importing this package loads no matplotlib).
"""
