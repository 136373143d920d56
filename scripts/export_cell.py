#!/usr/bin/env python3
"""Scripts and saves an example recurrent cell for `vlrnn verify/compare --model-file`.

The cell is an LSTM step (torch.nn.LSTMCell) looped over a block, with dropout on its output
drawn one step at a time. It follows the signature documented in
vlrnn/include/vlrnn/core/script_model.h (NOTE [ The TorchScript model signature ]):

    self.input_size: int                                  F
    initial_state(self, batch: int) -> Tuple[Tensor, Tensor]      (h [B, H], c [B, H])
    forward(self, x [T, B, F], state, lengths [B] int64)
        -> (z [T, B, H], state)   z zero past each sequence's end, state frozen there

Only torch.jit.script and Module.save are used (no version-specific API), so a LibTorch 2.x
loads what PyTorch 2.x saves, as LibTorch 1.13 loads what Debian's python3-torch 1.13 saves.

A stock torch.nn.LSTM / GRU / RNN needs no such signature: scripted as it is, vlrnn adapts
its forward(input, hx) (NOTE [ Stock recurrent modules in a model file ] in
vlrnn/include/vlrnn/core/stock_rnn_script.h); --stock saves one.

Usage: export_cell.py OUT.pt [--input F] [--hidden H] [--dropout P] [--seed S]
       export_cell.py OUT.pt --stock lstm|gru|rnn|rnn_relu [--layers L] [--time-first]
                             [--bidirectional] [--proj P]   (torch.jit.script(nn.LSTM(...));
                                                             batch_first=True by default)
       export_cell.py OUT.pt --broken KIND   (a deliberately wrong module, for the tests:
                                              arity, state, shape, lengths, batch_first)
       export_cell.py OUT.pt --per-call-mask TBH|BH   (the right signature, but a dropout
                      mask drawn once per call, not per step, for the tests: TBH one [T, B, H]
                      draw, BH one [B, H] mask shared by the call's steps)
"""
import argparse
import sys
from typing import Tuple

import torch
from torch import Tensor


# --- README script cell begin ---
class LstmCellLoop(torch.nn.Module):
    """T = block steps, B = batch, F = input, H = hidden."""

    def __init__(self, input_size: int, hidden_size: int, dropout: float):
        super().__init__()
        self.input_size = input_size  # read by vlrnn on load
        self.hidden_size = hidden_size
        self.dropout = dropout
        self.cell = torch.nn.LSTMCell(input_size, hidden_size)

    @torch.jit.export
    def initial_state(self, batch: int) -> Tuple[Tensor, Tensor]:
        h = torch.zeros(batch, self.hidden_size, dtype=self.cell.weight_ih.dtype,
                        device=self.cell.weight_ih.device)
        return (h, h.clone())

    def forward(self, x: Tensor, state: Tuple[Tensor, Tensor],
                lengths: Tensor) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
        h, c = state                                        # [B, H] each
        outputs = []
        for t in range(x.size(0)):
            valid = (lengths > t).unsqueeze(1)              # [B, 1]
            # Padding may be nan: select, never multiply by a mask.
            x_t = torch.where(valid, x[t], torch.zeros_like(x[t]))   # [B, F]
            h_new, c_new = self.cell(x_t, (h, c))
            h = torch.where(valid, h_new, h)
            c = torch.where(valid, c_new, c)
            # Dropout drawn at every step for the whole batch: the draws depend on the
            # steps run, not on where a block starts (the RecurrentModule contract).
            z_t = torch.nn.functional.dropout(h_new, self.dropout, self.training)
            outputs.append(torch.where(valid, z_t, torch.zeros_like(z_t)))
        return torch.stack(outputs), (h, c)             # [T, B, H], (h, c)
# --- README script cell end ---


class Broken(torch.nn.Module):
    """The cell above behind a signature that breaks the contract (TorchScript has no
    super(): each variant calls the cell as a submodule)."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.input_size = input_size
        self.inner = LstmCellLoop(input_size, hidden_size, 0.0)

    @torch.jit.export
    def initial_state(self, batch: int) -> Tuple[Tensor, Tensor]:
        return self.inner.initial_state(batch)


class WrongArity(Broken):
    def forward(self, x: Tensor, state: Tuple[Tensor, Tensor]) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
        return self.inner(x, state, torch.full([x.size(1)], x.size(0), dtype=torch.long))


class StateNotTuple(Broken):
    def forward(self, x: Tensor, state: Tensor, lengths: Tensor) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
        return self.inner(x, (state, state), lengths)


class WrongShape(Broken):
    def forward(self, x: Tensor, state: Tuple[Tensor, Tensor],
                lengths: Tensor) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
        z, s = self.inner(x, state, lengths)
        return z.transpose(0, 1), s                     # [B, T, H]: wrong


class IgnoresLengths(Broken):
    def forward(self, x: Tensor, state: Tuple[Tensor, Tensor],
                lengths: Tensor) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
        return self.inner(x, state, torch.full_like(lengths, x.size(0)))


class PerCallMask(torch.nn.Module):
    """The cell above with its dropout mask drawn once per forward() call instead of one
    step at a time, against the RecurrentModule contract. TBH: one [T, B, H] draw; on a CPU
    generator that fills a tensor element by element these masks equal per-step ones, so
    block methods pass there, and elsewhere they depend on where the sequence is cut. BH:
    one [B, H] mask for every step of the call (locked dropout), cut-dependent anywhere."""

    def __init__(self, input_size: int, hidden_size: int, dropout: float, per_step_shape: bool):
        super().__init__()
        self.input_size = input_size
        self.dropout = dropout
        self.per_step_shape = per_step_shape
        self.inner = LstmCellLoop(input_size, hidden_size, 0.0)

    @torch.jit.export
    def initial_state(self, batch: int) -> Tuple[Tensor, Tensor]:
        return self.inner.initial_state(batch)

    def forward(self, x: Tensor, state: Tuple[Tensor, Tensor],
                lengths: Tensor) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
        z, s = self.inner(x, state, lengths)                        # [T, B, H]
        keep = 1.0 - self.dropout
        if self.per_step_shape:
            mask = torch.bernoulli(torch.full(z.shape, keep, dtype=z.dtype))     # [T, B, H]
        else:
            mask = torch.bernoulli(torch.full(z.shape[1:], keep, dtype=z.dtype))  # [B, H]
        return z * mask / keep, s


class BatchFirst(Broken):
    """Reads x as [B, T, F], as a batch-first user's model would: fed [T, B, F], its cell
    gets a batch of T rows against a state of B."""

    def forward(self, x: Tensor, state: Tuple[Tensor, Tensor],
                lengths: Tensor) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
        h, c = state                                    # [B, H] each
        outputs = []
        for t in range(x.size(1)):
            h, c = self.inner.cell(x[:, t], (h, c))     # x[:, t]: [T, F] here, not [B, F]
            outputs.append(h)
        return torch.stack(outputs, 1), (h, c)


def stock_module(kind: str, args) -> torch.nn.Module:
    """torch.nn.LSTM / GRU / RNN as a PyTorch user builds it (batch_first=True unless
    --time-first)."""
    common = dict(num_layers=args.layers, batch_first=not args.time_first,
                  dropout=args.dropout, bidirectional=args.bidirectional)
    if kind == "lstm":
        return torch.nn.LSTM(args.input, args.hidden, proj_size=args.proj, **common)
    if kind == "gru":
        return torch.nn.GRU(args.input, args.hidden, **common)
    return torch.nn.RNN(args.input, args.hidden,
                        nonlinearity="relu" if kind == "rnn_relu" else "tanh", **common)


def main(argv=None) -> int:
    """Exports one module; `argv` as on the command line (default: sys.argv[1:])."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="where to save the scripted cell (.pt)")
    parser.add_argument("--input", type=int, default=8, help="F: input features")
    parser.add_argument("--hidden", type=int, default=16, help="H: hidden size")
    parser.add_argument("--dropout", type=float, default=None,
                        help="dropout on each step's output (default 0.1); with --stock, "
                        "between layers (default 0)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights")
    parser.add_argument("--broken", choices=["arity", "state", "shape", "lengths", "batch_first"],
                        help="save a module that breaks the signature, for the tests")
    parser.add_argument("--per-call-mask", choices=["TBH", "BH"],
                        help="draw the dropout mask once per call, [T, B, H] or one [B, H] for "
                             "every step (against the contract, for the tests)")
    parser.add_argument("--stock", choices=["lstm", "gru", "rnn", "rnn_relu"],
                        help="save a scripted stock torch.nn module instead of the cell")
    parser.add_argument("--layers", type=int, default=2, help="--stock: num_layers")
    parser.add_argument("--time-first", action="store_true", help="--stock: batch_first=False")
    parser.add_argument("--bidirectional", action="store_true", help="--stock: bidirectional")
    parser.add_argument("--proj", type=int, default=0, help="--stock lstm: proj_size")
    args = parser.parse_args(argv)
    if args.dropout is None:
        args.dropout = 0.0 if args.stock else 0.1
    torch.manual_seed(args.seed)
    if args.stock is not None:
        cell = stock_module(args.stock, args)
    elif args.per_call_mask:
        args.dropout = max(args.dropout, 0.3)  # masks that differ wherever they can
        cell = PerCallMask(args.input, args.hidden, args.dropout, args.per_call_mask == "TBH")
    elif args.broken is None:
        cell = LstmCellLoop(args.input, args.hidden, args.dropout)
    else:
        kind = {"arity": WrongArity, "state": StateNotTuple, "shape": WrongShape,
                "lengths": IgnoresLengths, "batch_first": BatchFirst}[args.broken]
        cell = kind(args.input, args.hidden)
    torch.jit.script(cell).save(args.out)
    print(f"export_cell: saved {type(cell).__name__} (F={args.input}, H={args.hidden}, "
          f"dropout={args.dropout}) to {args.out} with torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
