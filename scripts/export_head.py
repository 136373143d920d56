#!/usr/bin/env python3
"""Scripts and saves an example per-step head and loss for `vlrnn verify/compare
--head-file`, a sweep's "head_file" and a train config's "head_file".

The default head is an MLP on each step's z with its own categorical log-likelihood (the
loss a model of your own may care about, where the built-in "ce" is one Linear layer); the
"gaussian" head reads values instead, with a learned variance per output. Both follow the
signature documented in vlrnn/include/vlrnn/core/script_head.h (NOTE [ The TorchScript head
signature ]):

    self.input_size: int                     Z (the model's output size)
    self.num_classes: int  or  self.target_size: int     which targets y it reads
    forward(self, z [T, B, Z], y [T, B] int64 | [T, B, O]) -> loss [T, B], not reduced

Only torch.jit.script and Module.save are used, as in scripts/export_cell.py.

Usage: export_head.py OUT.pt [--input Z] [--hidden N] [--classes C] [--seed S]
       export_head.py OUT.pt --kind gaussian [--input Z] [--outputs O]
       export_head.py OUT.pt --broken KIND   (a deliberately wrong module, for the tests:
                                              arity, reduced, mixes, no-targets)
"""
import argparse
import sys

import torch
from torch import Tensor


# --- README script head begin ---
class MlpCategoricalHead(torch.nn.Module):
    """T = block steps, B = batch, Z = the model's output, C = classes."""

    def __init__(self, input_size: int, hidden: int, num_classes: int):
        super().__init__()
        self.input_size = input_size    # read by vlrnn on load: Z
        self.num_classes = num_classes  # y: class indices [T, B] int64 in [0, C)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(input_size, hidden), torch.nn.Tanh(),
                                       torch.nn.Linear(hidden, num_classes))

    def forward(self, z: Tensor, y: Tensor) -> Tensor:
        log_p = torch.log_softmax(self.mlp(z), dim=-1)             # [T, B, C]
        # The negative log-likelihood of each step: one loss per step, not reduced.
        return -log_p.gather(-1, y.unsqueeze(-1)).squeeze(-1)      # [T, B]
# --- README script head end ---


class GaussianHead(torch.nn.Module):
    """A Gaussian likelihood with a learned log-variance per output; y [T, B, O] values."""

    def __init__(self, input_size: int, outputs: int):
        super().__init__()
        self.input_size = input_size
        self.target_size = outputs
        self.mean = torch.nn.Linear(input_size, outputs)
        self.log_var = torch.nn.Parameter(torch.zeros(outputs))

    def forward(self, z: Tensor, y: Tensor) -> Tensor:
        error = (y - self.mean(z)).pow(2)                           # [T, B, O]
        return 0.5 * (self.log_var + error * torch.exp(-self.log_var)).sum(-1)  # [T, B]


class Broken(torch.nn.Module):
    """The categorical head behind something that breaks the contract."""

    def __init__(self, input_size: int, num_classes: int):
        super().__init__()
        self.input_size = input_size
        self.num_classes = num_classes
        self.inner = MlpCategoricalHead(input_size, 8, num_classes)


class WrongArity(Broken):
    def forward(self, z: Tensor) -> Tensor:
        return self.inner(z, torch.zeros(z.shape[:2], dtype=torch.long))


class Reduced(Broken):
    def forward(self, z: Tensor, y: Tensor) -> Tensor:
        return self.inner(z, y).mean()                              # a scalar: wrong


class MixesSteps(Broken):
    def forward(self, z: Tensor, y: Tensor) -> Tensor:
        return self.inner(z, y).cumsum(0)                           # [T, B] but not per step


class NoTargets(torch.nn.Module):
    """Says neither num_classes nor target_size."""

    def __init__(self, input_size: int, num_classes: int):
        super().__init__()
        self.input_size = input_size
        self.inner = MlpCategoricalHead(input_size, 8, num_classes)

    def forward(self, z: Tensor, y: Tensor) -> Tensor:
        return self.inner(z, y)


def main(argv=None) -> int:
    """Exports one module; `argv` as on the command line (default: sys.argv[1:])."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="where to save the scripted head (.pt)")
    parser.add_argument("--kind", choices=["categorical", "gaussian"], default="categorical")
    parser.add_argument("--input", type=int, default=16, help="Z: the model's output size")
    parser.add_argument("--hidden", type=int, default=32, help="the MLP's hidden units")
    parser.add_argument("--classes", type=int, default=5, help="C (categorical)")
    parser.add_argument("--outputs", type=int, default=2, help="O (gaussian)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights")
    parser.add_argument("--broken", choices=["arity", "reduced", "mixes", "no-targets"],
                        help="save a module that breaks the signature, for the tests")
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)
    if args.broken is not None:
        kind = {"arity": WrongArity, "reduced": Reduced, "mixes": MixesSteps,
                "no-targets": NoTargets}[args.broken]
        head = kind(args.input, args.classes)
    elif args.kind == "gaussian":
        head = GaussianHead(args.input, args.outputs)
    else:
        head = MlpCategoricalHead(args.input, args.hidden, args.classes)
    torch.jit.script(head).save(args.out)
    print(f"export_head: saved {type(head).__name__} (Z={args.input}) to {args.out} "
          f"with torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
