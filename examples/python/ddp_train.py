"""Data-parallel training with VLRNN: each process trains its share of every batch.

    torchrun --standalone --nproc_per_node 2 ddp_train.py    # 2 processes (gloo; NCCL on GPUs)
    python3 ddp_train.py                                     # 1 process: the same losses

Wrap the rnn and the head each in DistributedDataParallel and hand them to vlrnn.VLRNN as
they are: DDP all-reduces the gradients once per iteration, after the last block, and the
gradients are those of one process on the whole batch (MEAN: the mean over every sequence
of the global batch). Each rank's loss is its own share; the global one is printed.

Shapes: B = global batch, T = steps, F = input features, H = hidden units, C = classes.
"""
import gc
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.nn.utils.rnn import pack_padded_sequence

import vlrnn

B, T, F, H, C = 8, 200, 4, 32, 3
STEPS = 30


class Head(nn.Module):
    """A user's head: a linear layer and cross-entropy per step, loss [B, T]."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(H, C)

    def forward(self, z, y):
        return nn.functional.cross_entropy(self.linear(z).transpose(1, 2), y, reduction="none")


def global_batch(step):
    """The step's batch of sequences of varying lengths, the same on every rank: the class
    at t is how x[t - 1, 0] + x[t, 0] compares with ±1 (a step's memory)."""
    g = torch.Generator().manual_seed(step)
    lengths = torch.randint(T // 4, T + 1, (B,), generator=g)
    x = torch.randn(B, T, F, generator=g)
    pair = x[..., 0] + torch.cat([torch.zeros(B, 1), x[:, :-1, 0]], 1)
    y = (pair > 1).long() + (pair > -1).long()  # [B, T], 0..2
    return x, y, lengths


def main():
    distributed = "RANK" in os.environ  # set by torchrun (or srun with the usual variables)
    # One GPU per rank of a machine, on NCCL, where the machine has as many; else every rank
    # on the CPU, on gloo (the same choice on every rank: the backends must match).
    ranks_here = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    on_gpus = distributed and torch.cuda.device_count() >= ranks_here
    if distributed:
        dist.init_process_group("nccl" if on_gpus else "gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        rank, world = 0, 1
    device = torch.device("cpu")
    if on_gpus:
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)

    torch.manual_seed(0)  # the same weights on every rank (DDP also broadcasts rank 0's)
    rnn, head = nn.LSTM(F, H, batch_first=True).to(device), Head().to(device)
    parameters = list(rnn.parameters()) + list(head.parameters())
    if distributed:
        ids = [device.index] if device.type == "cuda" else None
        rnn = DistributedDataParallel(rnn, device_ids=ids)
        head = DistributedDataParallel(head, device_ids=ids)
    model = vlrnn.VLRNN(rnn, head, "MEAN", method="vlrnn:block_length=25")
    optimizer = torch.optim.Adam(parameters, lr=0.02)

    for step in range(STEPS):
        x, y, lengths = global_batch(step)
        rows = torch.tensor_split(torch.arange(B), world)[rank]  # this rank's sequences
        x = pack_padded_sequence(x[rows], lengths[rows], batch_first=True, enforce_sorted=False)
        y = pack_padded_sequence(y[rows], lengths[rows], batch_first=True, enforce_sorted=False)
        optimizer.zero_grad()
        loss = model(x.to(device), y.to(device))[0]
        optimizer.step()
        # MEAN of the global batch: each rank's mean weighted by its share of the sequences.
        total = loss * len(rows) / B
        if distributed:
            dist.all_reduce(total)
        if rank == 0 and (step % 5 == 0 or step == STEPS - 1):
            print(f"step {step:3d} loss {total.item():.6f}", flush=True)
    if distributed:
        # Free the process group while the interpreter is whole: the DDP wrappers hold it
        # (gc.collect: any cycle through them). Left to the interpreter's own shutdown, a
        # gloo rank can abort on PyTorch 2.6 after its work is done.
        del model, rnn, head, optimizer
        gc.collect()
        dist.barrier()  # every rank done with gloo before any tears it down
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
