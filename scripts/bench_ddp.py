#!/usr/bin/env python3
"""Data-parallel VLRNN on this machine: one global batch trained by 1 process and by W
processes (gloo, DistributedDataParallel), time per iteration and memory per process.

    /usr/bin/python3 scripts/bench_ddp.py [--world 1 2] [--threads 1] [--repeats 9]
                                          [--batch 16] [--steps 2000] [--hidden 128]

Each configuration starts its own processes (torch.multiprocessing, a file rendezvous; each
with --threads threads for LibTorch, OpenMP and the BLAS),
builds the same nn.LSTM and head on every rank, and runs `--repeats` timed iterations of
vlrnn.VLRNN (its default blocks: about ceil(sqrt(T)) steps) on the rank's share of the batch, after
one untimed warm-up. An iteration is the call (forward, backward, DDP's one all-reduce)
and the optimizer step; its time is the slowest rank's (they wait for one another in the
all-reduce). Memory: each process's peak resident set (ru_maxrss) after setup and at the
end, and their difference, what the iterations added. Also timed: one all-reduce of the
parameters' gradients alone (the communication per iteration, whatever T).

Prints a Markdown table (median and min-max over the repeats) and, with --json PATH, writes
every sample. Set PYTHONPATH to a built package (build/python) when it is not installed.
"""
import argparse
import gc
import json
import os
import resource
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

FEATURES, CLASSES = 32, 10


class Head(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.linear = nn.Linear(hidden, CLASSES)

    def forward(self, z, y):
        return nn.functional.cross_entropy(self.linear(z).transpose(1, 2), y, reduction="none")


def _peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _rank(rank, world, args, rendezvous, out_dir):
    import vlrnn
    torch.set_num_threads(args.threads)
    if world > 1:
        dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank,
                                world_size=world)
    torch.manual_seed(0)
    rnn, head = nn.LSTM(FEATURES, args.hidden, batch_first=True), Head(args.hidden)
    parameters = list(rnn.parameters()) + list(head.parameters())
    if world > 1:
        rnn, head = DistributedDataParallel(rnn), DistributedDataParallel(head)
    model = vlrnn.VLRNN(rnn, head, "MEAN")
    optimizer = torch.optim.SGD(parameters, lr=1e-3)
    rows = torch.tensor_split(torch.arange(args.batch), world)[rank]
    g = torch.Generator().manual_seed(1)
    x = torch.randn(args.batch, args.steps, FEATURES, generator=g)[rows]
    y = torch.randint(0, CLASSES, (args.batch, args.steps), generator=g)[rows]
    setup_rss = _peak_rss_mib()
    times = []
    for i in range(args.repeats + 1):
        if world > 1:
            dist.barrier()
        start = time.perf_counter()
        optimizer.zero_grad()
        model(x, y)
        optimizer.step()
        if world > 1:
            dist.barrier()  # the iteration ends when the slowest rank's does
        if i > 0:
            times.append(time.perf_counter() - start)
    all_reduce = []
    if world > 1:
        flat = torch.cat([p.detach().reshape(-1) for p in parameters])
        for _ in range(20):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(flat)
            all_reduce.append(time.perf_counter() - start)
        # The process group is freed here, while the interpreter is whole: DDP's reducers
        # hold it, so they go first (gc.collect: any cycle through them).
        del model, rnn, head, optimizer
        gc.collect()
        dist.barrier()  # every rank done with gloo before any tears it down
        dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"times": times, "setup_rss_mib": setup_rss, "peak_rss_mib": _peak_rss_mib(),
                   "all_reduce": all_reduce, "rows": len(rows),
                   "parameters": sum(p.numel() for p in parameters)}, f)


def run(world, args):
    # The processes' BLAS and OpenMP get --threads too: read when a process loads them, so
    # set before torch.multiprocessing starts the fresh interpreters (else OpenBLAS takes
    # every core in every process, and W processes oversubscribe the machine).
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(args.threads)
    with tempfile.TemporaryDirectory() as work:
        torch.multiprocessing.spawn(_rank, args=(world, args, os.path.join(work, "rdzv"), work),
                                    nprocs=world, join=True)
        return [json.load(open(os.path.join(work, f"rank{r}.json"))) for r in range(world)]


def _spread(values, scale=1.0):
    values = [v * scale for v in values]
    return f"{statistics.median(values):.3g} ({min(values):.3g}-{max(values):.3g})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=int, nargs="+", default=[1, 2],
                        help="process counts to compare (default 1 2)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    parser.add_argument("--repeats", type=int, default=9, help="timed iterations")
    parser.add_argument("--batch", type=int, default=16, help="global batch B")
    parser.add_argument("--steps", type=int, default=2000, help="sequence length T")
    parser.add_argument("--hidden", type=int, default=128, help="LSTM hidden units H")
    parser.add_argument("--json", help="also write every sample here")
    args = parser.parse_args()
    for name in ("repeats", "batch", "steps", "hidden", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}: expected >= 1, got {getattr(args, name)}")
    if any(w < 1 or w > args.batch for w in args.world):
        parser.error(f"--world: expected counts from 1 to the batch ({args.batch}), "
                     f"got {args.world}")
    if not dist.is_available() or not dist.is_gloo_available():
        sys.exit("bench_ddp.py: this torch has no torch.distributed with gloo")

    results = {}
    print(f"B={args.batch} T={args.steps} H={args.hidden} F={FEATURES}, {args.threads} "
          f"thread(s) per process, {args.repeats} repeats, torch {torch.__version__}",
          flush=True)
    print("| processes | s / iteration | peak RSS / process (MiB) | added by the iterations "
          "(MiB) | all-reduce of the gradients (ms) |")
    print("|---|---|---|---|---|")
    for world in args.world:
        ranks = run(world, args)
        results[world] = ranks
        slowest = [max(r["times"][i] for r in ranks) for i in range(args.repeats)]
        peak = max(r["peak_rss_mib"] for r in ranks)
        added = max(r["peak_rss_mib"] - r["setup_rss_mib"] for r in ranks)
        reduce = _spread(ranks[0]["all_reduce"], 1e3) if world > 1 else "-"
        print(f"| {world} | {_spread(slowest)} | {peak:.0f} | {added:.0f} | {reduce} |",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "torch": torch.__version__, "results": results}, f)


if __name__ == "__main__":
    main()
