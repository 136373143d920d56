#!/usr/bin/env python3
"""Summary of an LSTM block benchmark folder (scripts/bench_lstm_block.sh).

    python3 scripts/summarize_lstm_block.py results/cpu-lstm-block

Reads every bench_lstm_block*.json (Google Benchmark) in the folder and writes summary.csv:
one row per implementation, hidden size H and minibatch B, with the median wall-clock time
of the repetitions and its spread (min, max), achieved GFLOP/s (useful FLOPs / median time),
utilization of the peak GEMM rate measured at the program's start, resident memory grown
(held after forward, peak; least of the repetitions), and the speed-ups of lstm_block over
LibTorch's nn::LSTM and over the LSTMCell loop (time of the other / time). Prints the table.
"""
import csv
import glob
import os
import re
import statistics
import sys

import bench_json

IMPLEMENTATIONS = ["LstmBlock/gates", "LstmBlock/preactivations", "TorchLstm", "TorchLstmCellLoop"]
NAME = re.compile(r"^BM_(?P<impl>[A-Za-z]+(?:/[a-z]+)?)/H:(?P<H>\d+)/B:(?P<B>\d+)")


def main():
    folder = sys.argv[1]
    times, info = {}, {}
    for path in sorted(glob.glob(os.path.join(folder, "bench_lstm_block*.json"))):
        peak = float(bench_json.context(path).get("peak_gemm_flops_per_s", "0"))
        for m, seconds, b in bench_json.iterations(path, NAME):
            key = (m["impl"], int(m["H"]), int(m["B"]))
            times.setdefault(key, []).append(seconds)
            old = info.get(key, {"held": 1e30, "peak_mb": 1e30})
            info[key] = {"flop": b["GFLOP"] * 1e9, "peak": peak,
                         "held": min(old["held"], b.get("held_MB", -1)),
                         "peak_mb": min(old["peak_mb"], b.get("peak_MB", -1))}
    if not times:
        sys.exit(f"{folder}: no benchmark points found")
    rows = []
    for impl in IMPLEMENTATIONS:
        for key in sorted(k for k in times if k[0] == impl):
            _, h, b = key
            t = times[key]
            med = statistics.median(t)
            rate = info[key]["flop"] / med
            torch_lstm = times.get(("TorchLstm", h, b))
            loop = times.get(("TorchLstmCellLoop", h, b))
            rows.append([impl, h, b, len(t), f"{med:.4f}", f"{min(t):.4f}", f"{max(t):.4f}",
                         f"{rate / 1e9:.1f}",
                         f"{rate / info[key]['peak']:.3f}" if info[key]["peak"] > 0 else "",
                         f"{info[key]['held']:.0f}", f"{info[key]['peak_mb']:.0f}",
                         f"{statistics.median(torch_lstm) / med:.2f}" if torch_lstm else "",
                         f"{statistics.median(loop) / med:.2f}" if loop else ""])
    header = ["implementation", "H", "B", "repetitions", "median_real_s", "min_s", "max_s",
              "gflop_per_s", "utilization", "held_MB", "peak_MB", "speed_vs_torch_lstm",
              "speed_vs_cell_loop"]
    with open(os.path.join(folder, "summary.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    print(" | ".join(header))
    for r in rows:
        print(" | ".join(str(x) for x in r))


if __name__ == "__main__":
    main()
