#!/usr/bin/env python3
"""Each gradient method on modules and batches placed on the GPU, against vlrnn.PlainRNN
(full BPTT in PyTorch) on the same device, in float64: which work exactly there, which
raise, and with what. On a machine without CUDA the same cases run on the CPU.

    PYTHONPATH=<build>/python python3 scripts/device/cuda_probe.py --out probe.json

One row per (model, batch, method): max_rel (the largest relative difference over the loss
and every gradient), passed (within 1e-10), or error (the exception's type and first line).
Then bfloat16 (torch.nn's modules, so cuDNN on a GPU), where no method can be exact: per
model, full BPTT's and VLRNN's gradients in bfloat16, each against float64 full BPTT's, and
against each other. VLRNN is as good as full BPTT there when its error is of the same size
(it sums a weight's gradient block by block, full BPTT over all steps at once, each rounding
to bfloat16). Then float16 under torch.autocast with a GradScaler, as mixed-precision loops
train: full BPTT's scaler.scale(loss).backward() and VLRNN's grad_scaler=, the gradients
unscaled, against float64 and each other. These rows report; they pass or fail nothing.
Exit 0 when it ran, whatever the rows say: it reports, scripts/device/check.sh summarises.
Shapes: B = batch, T = steps, F = input features, H = hidden, C = classes.
"""
import argparse
import copy
import json
import sys
import time

import torch
from torch import nn
from torch.nn.utils.rnn import pack_sequence

import vlrnn

B, T, F, H, C = 4, 40, 3, 16, 5
METHODS = ["full", "vlrnn:num_blocks=4", "checkpoint", "revolve:slots=3", "planner:percent=30"]
TOLERANCE = 1e-10


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(H, C)

    def forward(self, z, y):
        return nn.functional.cross_entropy(self.linear(z).transpose(1, 2), y, reduction="none")


def models():
    """(name, constructor, VLRNN keyword arguments)."""
    return [
        ("nn.LSTM, called as it is", lambda: nn.LSTM(F, H, batch_first=True), {"fast_cells": False}),
        ("nn.GRU 2 layers, called as it is", lambda: nn.GRU(F, H, 2, batch_first=True),
         {"fast_cells": False}),
        ("nn.LSTM, the hand-written cells", lambda: nn.LSTM(F, H, batch_first=True), {}),
        ("vlrnn.nn.LSTM 2 layers, dropout 0.3", lambda: vlrnn.nn.LSTM(F, H, 2, dropout=0.3,
                                                                     batch_first=True), {}),
        ("vlrnn.nn.MinGRU", lambda: vlrnn.nn.MinGRU(F, H, batch_first=True), {}),
        ("nn.LSTM bidirectional", lambda: nn.LSTM(F, H // 2, batch_first=True,
                                                  bidirectional=True), {}),
    ]


def batch(packed, device):
    g = torch.Generator().manual_seed(0)
    if not packed:
        x = torch.randn(B, T, F, generator=g, dtype=torch.float64)
        y = torch.randint(0, C, (B, T), generator=g)
        return x.to(device), y.to(device)
    lengths = [T, 17, 31, 1]
    x = pack_sequence([torch.randn(n, F, generator=g, dtype=torch.float64) for n in lengths],
                      enforce_sorted=False)
    y = pack_sequence([torch.randint(0, C, (n,), generator=g) for n in lengths],
                      enforce_sorted=False)
    return x.to(device), y.to(device)


def gradients(modules):
    return [p.grad.clone() for m in modules for p in m.parameters()]


def max_rel(got, want):
    """The largest |got - want| over the tensors, each relative to its largest |want|."""
    return max(((g - w).abs().max() / w.abs().max().clamp_min(1e-300)).item()
               for g, w in zip(got, want))


def run_case(make, kwargs, packed, method, device):
    torch.manual_seed(0)
    rnn, out = make().double().to(device), Head().double().to(device)
    x, y = batch(packed, device)
    torch.manual_seed(1)
    want_loss = vlrnn.PlainRNN(rnn, out, "MEAN")(x, y)[0]
    want_loss.backward()
    want = gradients([rnn, out])
    for p in list(rnn.parameters()) + list(out.parameters()):
        p.grad = None
    torch.manual_seed(1)
    if method.startswith("vlrnn") and getattr(rnn, "bidirectional", False):
        method = method.replace("vlrnn", "bivlrnn")
    loss = vlrnn.VLRNN(rnn, out, "MEAN", **kwargs)(x, y, method=method)[0]
    got = gradients([rnn, out])
    loss_rel = abs(loss.item() - want_loss.item()) / abs(want_loss.item())
    return method, max(loss_rel, max_rel(got, want))


def bf16_case(make, device):
    """{full, vlrnn}_vs_float64 and vlrnn_vs_full: the largest relative gradient errors."""
    torch.manual_seed(0)
    rnn, out = make().double().to(device), Head().double().to(device)
    x, y = batch(False, device)

    def gradients_of(run):
        for p in list(rnn.parameters()) + list(out.parameters()):
            p.grad = None
        loss = run(x.to(next(rnn.parameters()).dtype), y)[0]
        if loss.requires_grad:  # PlainRNN's; VLRNN's gradients are already in .grad
            loss.backward()
        return [g.double() for g in gradients([rnn, out])]

    reference = gradients_of(vlrnn.PlainRNN(rnn, out, "MEAN"))
    rnn.to(torch.bfloat16), out.to(torch.bfloat16)
    full = gradients_of(vlrnn.PlainRNN(rnn, out, "MEAN"))
    blocks = gradients_of(vlrnn.VLRNN(rnn, out, "MEAN", N=4))
    return {"full_vs_float64": max_rel(full, reference),
            "vlrnn_vs_float64": max_rel(blocks, reference),
            "vlrnn_vs_full": max_rel(blocks, full)}


def fp16_case(make, device):
    """{full, vlrnn}_vs_float64 and vlrnn_vs_full under float16 autocast with a GradScaler:
    the largest relative errors of the unscaled gradients; scale: the scaler's."""
    torch.manual_seed(0)
    rnn, out = make().float().to(device), Head().float().to(device)
    x, y = batch(False, device)
    reference_modules = [copy.deepcopy(rnn).double(), copy.deepcopy(out).double()]
    vlrnn.PlainRNN(*reference_modules, "MEAN")(x, y)[0].backward()
    reference = gradients(reference_modules)
    scale = 2.0 ** 16

    def gradients_of(run):
        for p in list(rnn.parameters()) + list(out.parameters()):
            p.grad = None
        scaler = torch.amp.GradScaler(device.type, init_scale=scale)
        with torch.autocast(device.type, dtype=torch.float16):
            run(scaler, x.float(), y)
        return [g.double() / scale for g in gradients([rnn, out])]

    def full(scaler, x, y):
        scaler.scale(vlrnn.PlainRNN(rnn, out, "MEAN")(x, y)[0]).backward()

    def blocks(scaler, x, y):
        vlrnn.VLRNN(rnn, out, "MEAN", N=4)(x, y, grad_scaler=scaler)

    full_grads, block_grads = gradients_of(full), gradients_of(blocks)
    return {"scale": scale, "full_vs_float64": max_rel(full_grads, reference),
            "vlrnn_vs_float64": max_rel(block_grads, reference),
            "vlrnn_vs_full": max_rel(block_grads, full_grads)}


def low_precision_rows(device, dtype, case):
    rows = []
    for name, make, _ in models()[:2]:  # torch.nn's, called as they are
        row = {"device": str(device), "model": name, "dtype": dtype}
        try:
            row.update(case(make, device))
            verdict = ", ".join(f"{k} {v:.1e}" for k, v in row.items()
                                if k.endswith(("float64", "full")))
        except Exception as error:  # a row to report, not a crash of the probe
            row["error"] = f"{type(error).__name__}: {str(error).strip()[:200]}"
            verdict = row["error"]
        print(f"{device} | {name} | {dtype} | {verdict}", flush=True)
        rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the JSON file of rows to write")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rows = []
    for name, make, kwargs in models():
        for packed in (False, True):
            for method in METHODS:
                if "bidirectional" in name and method.startswith("revolve"):
                    continue  # refused by design: it cuts left-to-right blocks
                row = {"device": str(device), "model": name,
                       "batch": "packed" if packed else "fixed", "method": method}
                start = time.monotonic()
                try:
                    row["method"], row["max_rel"] = run_case(make, kwargs, packed, method, device)
                    row["passed"] = row["max_rel"] <= TOLERANCE
                except Exception as error:  # a row to report, not a crash of the probe
                    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
                    row["error"] = f"{type(error).__name__}: {first}"[:300]
                    row["passed"] = False
                row["time_s"] = round(time.monotonic() - start, 3)
                rows.append(row)
                verdict = (f"max_rel {row['max_rel']:.1e}" if "max_rel" in row
                           else row["error"])
                print(f"{row['device']} | {name} | {row['batch']} | {row['method']} | "
                      f"{verdict}", flush=True)
    bfloat16 = low_precision_rows(device, "bfloat16", bf16_case)
    float16 = low_precision_rows(device, "float16", fp16_case)
    with open(args.out, "w") as f:
        json.dump({"torch": torch.__version__, "device": str(device), "rows": rows,
                   "bfloat16": bfloat16, "float16": float16}, f, indent=1)
    passed = sum(r["passed"] for r in rows)
    print(f"cuda_probe: {passed} of {len(rows)} cases exact on {device}")


if __name__ == "__main__":
    sys.exit(main())
