#!/usr/bin/env python3
"""The Python package against its Python peers, side by side in one process.

    PYTHONPATH=build/python /usr/bin/python3 scripts/bench_python.py --out results/cpu-python

Three experiments, every peer computing the same loss's gradients (float32, one intra-op
thread, OpenBLAS with one thread), peers taking turns within each round:

  original  the original Python VLRNN's benchmark shape: LSTM I=32 H=256 + Linear(256, 10)
            cross-entropy, B=16, T=4000, MEAN. Peers:
              pytorch_full      nn.LSTM + loss.backward() (full BPTT in PyTorch)
              torch_checkpoint  torch.utils.checkpoint over ceil(sqrt(T)) segments
              original_vlrnn    the original's algorithm in Python (no-grad pass storing the
                                block entry states; blocks last to first, two backward
                                calls each), re-implemented here, N=40 blocks
              vlrnn_nn_lstm     vlrnn.VLRNN(N=40) on nn.LSTM, as a user calls it (the
                                stock module runs by the hand-written cell: fast_cells)
              vlrnn_nn_lstm_as_is
                                the same with fast_cells=False: nn.LSTM itself called back
                                once per block
              vlrnn_lstm_block  vlrnn.VLRNN(N=40) on vlrnn.nn.LSTM
              vlrnn_lstm_block_planner
                                vlrnn.VLRNN(method="planner:budget=P") on vlrnn.nn.LSTM, P
                                torch_checkpoint's iteration peak (measured first): the
                                fastest schedule the planner finds within checkpoint's memory
              cpp_lstm          the same method (vlrnn:num_blocks=40) from C++ on the built-in
                                "lstm" model (LibTorch's LSTM, as nn.LSTM as is) and "ce" head
              cpp_lstm_block    the same on the built-in "lstm_block" model
              gemm_floor        only the GEMMs VLRNN(N=40) on an LSTM runs, at their
                                shapes: what any implementation over this BLAS needs
  cell      H=1024 B=64 T=256 I=32, full BPTT under plain loss.backward(): nn.LSTM against
            vlrnn.nn.LSTM
  flat      vlrnn.VLRNN with vlrnn.nn.LSTM, blocks of 100 steps, at T=250 and T=4000 (the
            original's shape otherwise): the iteration peak against T
  gpu       the GPU targets' shape on --device (default there: LSTM I=256 H=1024 B=64
            T=16384, Linear(1024, 10) cross-entropy; --gpu-shape), nn.LSTM on cuDNN
            throughout: pytorch_full, torch_checkpoint, original_vlrnn and
              vlrnn_nn_lstm_as_is   vlrnn.VLRNN(N=T/128) on nn.LSTM, fast_cells=False (cuDNN
                                    called back once per block)
              vlrnn_planner_10      vlrnn.VLRNN(method="planner:percent=10") on the same

Each record: one peer's time per iteration (seconds, every round's; on a GPU, from a
synchronised device to a synchronised device) and iteration peak (exact bytes of live CPU
tensors above what was live before the iteration, from the tracking allocator `vlrnn
compare` uses; on a GPU, the caching allocator's peak of allocated bytes above the start), with the median, the spread and, against the
experiment's reference peer, the paired time ratio with its 95 % bootstrap interval; the
ratios against every other peer of the experiment too (paired_time_ratio_to: [median,
interval low, interval high]; peak_ratio_to).
Writes DIR/results.jsonl, DIR/meta.json; `python3 scripts/plot.py DIR` draws it.
"""
import argparse
import json
import math
import os
import platform
import random
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from system_python import require  # noqa: E402

require("torch")
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

import vlrnn  # noqa: E402
from vlrnn import _C  # noqa: E402
import results_writer  # noqa: E402
from vlrnn_plots import stats  # noqa: E402


class Lstm(nn.LSTM, vlrnn.RNNModule):
    pass


class BlockLstm(vlrnn.nn.LSTM, vlrnn.RNNModule):
    pass


class CrossEntropyHead(vlrnn.OutputModule):
    def __init__(self, hidden, classes):
        super().__init__()
        self.linear = nn.Linear(hidden, classes)

    def forward(self, z, y):  # z [B, T, H], y [B, T] -> [B, T]
        return nn.functional.cross_entropy(self.linear(z).transpose(1, 2), y, reduction="none")


def full_bptt(rnn, head, x, y):
    z, _ = rnn(x, None)
    head(z, y).mean().backward()


def checkpointed(rnn, head, x, y):
    steps = x.shape[1]
    size = math.ceil(steps / math.ceil(math.sqrt(steps)))

    def segment(xs, ys, h, c):
        z, (h, c) = rnn(xs, (h, c))
        return head(z, ys).sum(), h, c

    h = c = x.new_zeros(1, x.shape[0], rnn.hidden_size)
    total = 0
    for start in range(0, steps, size):
        loss, h, c = checkpoint(segment, x[:, start:start + size], y[:, start:start + size], h,
                                c, use_reentrant=False)
        total = total + loss
    (total / y.numel()).backward()


def original_algorithm(rnn, head, x, y, blocks):
    """The original Python VLRNN's algorithm (MEAN), fixed lengths."""
    xs, ys = x.chunk(blocks, 1), y.chunk(blocks, 1)
    entries = [None]
    with torch.no_grad():
        h = None
        for xb in xs[:-1]:
            _, h = rnn(xb, h)
            entries.append(h)
    delta = None
    for n in reversed(range(len(xs))):
        h_n = entries[n]
        if h_n is not None:
            h_n = tuple(t.detach().requires_grad_() for t in h_n)
        z, h_out = rnn(xs[n], h_n)
        loss = head(z, ys[n]).sum() / y.numel()
        if delta is None:
            loss.backward()
        else:
            loss.backward(retain_graph=True)
            torch.autograd.backward(h_out, delta)
        delta = tuple(t.grad for t in h_n) if h_n is not None else None


def gemm_floor(steps, batch, features, hidden, blocks):
    """Only the matrix multiplies VLRNN(N=blocks) on an LSTM must run, at their shapes and
    count, into preallocated outputs, nothing else: no gates, no head, no engine. What any
    implementation over this BLAS needs at least (the Python loop adds ~2 us per call).
    Per step: the recurrent GEMM twice (the pass without gradients, which skips the last
    block, and the recomputation) and the backward's dh = D W_hh; per block: the input
    projection as often and the weight gradients dW_hh, dW_ih as one GEMM each over the
    block's steps."""
    gates = 4 * hidden
    size = math.ceil(steps / blocks)
    w_hh, w_ih = torch.randn(gates, hidden), torch.randn(gates, features)
    h, d = torch.randn(batch, hidden), torch.randn(batch, gates)  # [B, H], [B, 4H]
    a, dh = torch.empty(batch, gates), torch.empty(batch, hidden)
    xs = torch.randn(size * batch, features)  # [K*B, F]
    hs, ds = torch.randn(size * batch, hidden), torch.randn(size * batch, gates)
    proj = torch.empty(size * batch, gates)
    dw_hh, dw_ih = torch.zeros(gates, hidden), torch.zeros(gates, features)

    def run():
        for start in range(0, steps, size):
            passes = 1 if start + size >= steps else 2  # the last block is not recomputed
            for _ in range(passes):
                torch.mm(xs, w_ih.t(), out=proj)
                for _ in range(min(size, steps - start)):
                    torch.mm(h, w_hh.t(), out=a)
            for _ in range(min(size, steps - start)):
                torch.mm(d, w_hh, out=dh)
            dw_hh.addmm_(ds.t(), hs)
            dw_ih.addmm_(ds.t(), xs)
    return run


def copy_parameters(source_named, target_named):
    """Copies parameters in order (the built-in C++ models name them after LibTorch's)."""
    with torch.no_grad():
        for (_, s), (_, t) in zip(source_named, target_named):
            t.copy_(s)


def peers_original(args):
    torch.manual_seed(0)
    steps, batch, features, hidden, classes = args.T, 16, 32, 256, 10
    rnn = Lstm(features, hidden, batch_first=True)
    block = BlockLstm(features, hidden, batch_first=True)
    block.load_state_dict(rnn.state_dict())
    head = CrossEntropyHead(hidden, classes)
    x = torch.randn(batch, steps, features)
    y = torch.randint(0, classes, (batch, steps))
    cpp = {kind: (_C.make_model(kind, features, hidden, 1), _C.make_head("ce", hidden, classes))
           for kind in ("lstm", "lstm_block")}
    for model, cpp_head in cpp.values():
        copy_parameters(rnn.named_parameters(), model.named_parameters())
        copy_parameters(head.named_parameters(), cpp_head.named_parameters())
    method = _C.make_method(f"vlrnn:num_blocks={args.blocks}")
    on_nn = vlrnn.VLRNN(rnn, head, "MEAN", N=args.blocks)
    on_nn_as_is = vlrnn.VLRNN(rnn, head, "MEAN", N=args.blocks, fast_cells=False)
    on_block = vlrnn.VLRNN(block, head, "MEAN", N=args.blocks)
    _, checkpoint_peak = one_iteration(lambda: checkpointed(rnn, head, x, y), [rnn, head])
    planned = vlrnn.VLRNN(block, head, "MEAN", method=f"planner:budget={checkpoint_peak}")
    x_tm, y_tm = x.transpose(0, 1), y.transpose(0, 1)

    def from_cpp(kind):
        model, cpp_head = cpp[kind]
        return lambda: _C.compute(method, model, cpp_head, x_tm, y_tm, None, None, "mean")

    peers = {
        "pytorch_full": (lambda: full_bptt(rnn, head, x, y), [rnn, head]),
        "torch_checkpoint": (lambda: checkpointed(rnn, head, x, y), [rnn, head]),
        "original_vlrnn": (lambda: original_algorithm(rnn, head, x, y, args.blocks),
                           [rnn, head]),
        "vlrnn_nn_lstm": (lambda: on_nn(x, y), [rnn, head]),
        "vlrnn_nn_lstm_as_is": (lambda: on_nn_as_is(x, y), [rnn, head]),
        "vlrnn_lstm_block": (lambda: on_block(x, y), [block, head]),
        "vlrnn_lstm_block_planner": (lambda: planned(x, y), [block, head]),
        "cpp_lstm": (from_cpp("lstm"), [cpp["lstm"][0], cpp["lstm"][1]]),
        "cpp_lstm_block": (from_cpp("lstm_block"), [cpp["lstm_block"][0], cpp["lstm_block"][1]]),
        "gemm_floor": (gemm_floor(steps, batch, features, hidden, args.blocks), []),
    }
    shape = dict(T=steps, B=batch, F=features, H=hidden, classes=classes, blocks=args.blocks,
                 planner_budget=checkpoint_peak)
    return peers, shape, "pytorch_full"


def peers_cell(args):
    torch.manual_seed(0)
    steps, batch, features, hidden = 256, 64, 32, 1024
    stock = nn.LSTM(features, hidden)
    ours = vlrnn.nn.LSTM(features, hidden)
    ours.load_state_dict(stock.state_dict())
    x = torch.randn(steps, batch, features)

    def step(module):
        z, _ = module(x)
        z.pow(2).mean().backward()

    peers = {"nn_lstm": (lambda: step(stock), [stock]),
             "vlrnn_nn_lstm_cell": (lambda: step(ours), [ours])}
    return peers, dict(T=steps, B=batch, F=features, H=hidden), "nn_lstm"


def peers_flat(args):
    torch.manual_seed(0)
    batch, features, hidden, classes = 16, 32, 256, 10
    rnn = BlockLstm(features, hidden, batch_first=True)
    head = CrossEntropyHead(hidden, classes)
    peers = {}
    for steps in (args.flat_short, args.flat_short * 16):
        x = torch.randn(batch, steps, features)
        y = torch.randint(0, classes, (batch, steps))
        model = vlrnn.VLRNN(rnn, head, "MEAN", method="vlrnn:block_length=100")
        peers[f"vlrnn_lstm_block_T{steps}"] = (lambda m=model, x=x, y=y: m(x, y), [rnn, head])
    return peers, dict(B=batch, F=features, H=hidden, classes=classes, K=100), \
        f"vlrnn_lstm_block_T{args.flat_short}"


def peers_gpu(args):
    """The GPU targets' peers at --gpu-shape on --device (every peer on nn.LSTM: cuDNN)."""
    torch.manual_seed(0)
    features, hidden, batch, steps = args.gpu_shape
    classes, block = 10, 128
    blocks = max(1, steps // block)
    rnn = Lstm(features, hidden, batch_first=True).to(args.device)
    head = CrossEntropyHead(hidden, classes).to(args.device)
    x = torch.randn(batch, steps, features).to(args.device)
    y = torch.randint(0, classes, (batch, steps)).to(args.device)
    as_is = vlrnn.VLRNN(rnn, head, "MEAN", N=blocks, fast_cells=False)
    planned = vlrnn.VLRNN(rnn, head, "MEAN", method="planner:percent=10", fast_cells=False)
    peers = {
        "pytorch_full": (lambda: full_bptt(rnn, head, x, y), [rnn, head]),
        "torch_checkpoint": (lambda: checkpointed(rnn, head, x, y), [rnn, head]),
        "original_vlrnn": (lambda: original_algorithm(rnn, head, x, y, blocks), [rnn, head]),
        "vlrnn_nn_lstm_as_is": (lambda: as_is(x, y), [rnn, head]),
        "vlrnn_planner_10": (lambda: planned(x, y), [rnn, head]),
    }
    shape = dict(T=steps, B=batch, F=features, H=hidden, classes=classes, blocks=blocks,
                 device=str(args.device))
    return peers, shape, "pytorch_full"


def named_tensors(module):
    if isinstance(module, nn.Module):
        return list(module.parameters())
    return [p for _, p in module.named_parameters()]


def one_iteration(run, modules, device=torch.device("cpu")):
    for module in modules:
        for p in named_tensors(module):
            p.grad = None
    if device.type == "cuda":
        # The caching allocator's peak above what was live, the clock from an idle device
        # to an idle device: the host returns before the GPU is done.
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        start = time.perf_counter()
        run()
        torch.cuda.synchronize(device)
        seconds = time.perf_counter() - start
        return seconds, torch.cuda.max_memory_allocated(device) - before
    before = _C.memory.reset_peak()
    start = time.perf_counter()
    run()
    seconds = time.perf_counter() - start
    return seconds, _C.memory.peak_bytes() - before


def paired(a, b):
    """[median of a[i] / b[i], 95 % interval low, high] over the paired rounds."""
    ratios = sorted(x / y for x, y in zip(a, b))
    ci = stats.paired_ratio_ci(a, b) or [None, None]
    return [ratios[len(ratios) // 2], *ci]


def measure(name, factory, args, write):
    peers, shape, reference = factory(args)
    device = args.device if name == "gpu" else torch.device("cpu")
    names = list(peers)
    print(f"== {name}: {shape}; reference {reference}", flush=True)
    for _ in range(args.warmup):
        for peer in names:
            one_iteration(*peers[peer], device=device)
    seconds = {peer: [] for peer in names}
    peaks = {peer: [] for peer in names}
    rng = random.Random(0)
    for round_index in range(args.repeats):
        order = names[:]
        rng.shuffle(order)  # turns within each round, in a different order each round
        for peer in order:
            s, peak = one_iteration(*peers[peer], device=device)
            seconds[peer].append(s)
            peaks[peer].append(peak)
        print(f"   round {round_index + 1}/{args.repeats}: " +
              ", ".join(f"{p} {seconds[p][-1]:.3f}s" for p in names), flush=True)
    for order, peer in enumerate(names):
        summary = stats.summarize(seconds[peer])
        ratio_ci = stats.paired_ratio_ci(seconds[peer], seconds[reference])
        ratios = sorted(a / b for a, b in zip(seconds[peer], seconds[reference]))
        record = dict(kind="python_peer", experiment=name, peer=peer, order=order,
                      reference=reference, **shape,
                      time_s=summary,  # with samples_s, the rounds in order
                      peak_bytes=min(peaks[peer]), peak_bytes_samples=peaks[peer],
                      paired_time_ratio=ratios[len(ratios) // 2],
                      paired_time_ratio_ci=ratio_ci,
                      time_ratio_noisy=stats.is_noisy(ratios[len(ratios) // 2], ratio_ci),
                      paired_time_ratio_to={other: paired(seconds[peer], seconds[other])
                                            for other in names if other != peer},
                      peak_ratio_to={other: min(peaks[peer]) / max(min(peaks[other]), 1)
                                     for other in names if other != peer})
        write(record)
        ci = f"[{ratio_ci[0]:.3f}, {ratio_ci[1]:.3f}]" if ratio_ci else "-"
        print(f"   {peer:20s} {summary['median']:8.3f} s  "
              f"({summary['min']:.3f}-{summary['max']:.3f})  peak "
              f"{min(peaks[peer]) / 2**20:9.2f} MiB   x{record['paired_time_ratio']:.3f} {ci} "
              f"of {reference}", flush=True)


def sh(command):
    return subprocess.run(command, shell=True, capture_output=True, text=True).stdout.strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="result folder (created)")
    parser.add_argument("--T", type=int, default=4000, help="steps, original experiment")
    parser.add_argument("--blocks", type=int, default=40, help="N, original experiment")
    parser.add_argument("--flat-short", type=int, default=250, help="the flat experiment's "
                        "short T (the long one is 16 times it)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--experiments", default="original,cell,flat",
                        help="comma-separated: original, cell, flat (CPU) or gpu")
    parser.add_argument("--device", default="cpu",
                        help="where the gpu experiment runs: cpu, cuda or cuda:N (the others "
                        "run on the CPU)")
    parser.add_argument("--gpu-shape", default="256,1024,64,16384",
                        help="the gpu experiment's I,H,B,T")
    args = parser.parse_args()
    factories = {"original": peers_original, "cell": peers_cell, "flat": peers_flat,
                 "gpu": peers_gpu}
    chosen = args.experiments.split(",")
    for name in chosen:
        if name not in factories:
            parser.error(f"--experiments: unknown {name!r}; known: {', '.join(factories)}")
    try:
        args.device = torch.device(args.device)
    except RuntimeError:
        parser.error(f"--device: expected cpu, cuda or cuda:N, got {args.device!r}")
    if args.device.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device: {args.device} asked for, but this torch sees no CUDA device")
    if args.device.type not in ("cpu", "cuda"):
        parser.error(f"--device: expected cpu, cuda or cuda:N, got {args.device}")
    try:
        shape = [int(v) for v in args.gpu_shape.split(",")]
    except ValueError:
        shape = []
    if len(shape) != 4 or min(shape) < 1:
        parser.error(f"--gpu-shape: expected four positive integers I,H,B,T, got "
                     f"{args.gpu_shape!r}")
    args.gpu_shape = shape
    torch.set_num_threads(1)
    _C.memory.install()
    os.makedirs(args.out, exist_ok=True)
    meta = results_writer.environment(
        " ".join(["scripts/bench_python.py"] + sys.argv[1:]), torch.__version__,
        sh("readlink -f /etc/alternatives/libblas.so.3-x86_64-linux-gnu"), torch.get_num_threads())
    blas = _C.blas_info()  # OpenBLAS's kernel, and a warning when it is a slow one
    if blas["warning"]:
        print(f"bench_python.py: WARNING: {blas['warning']}", file=sys.stderr)
    meta["blas"]["core"] = blas["core"]
    if "gpu" in chosen and args.device.type == "cuda":
        p = torch.cuda.get_device_properties(args.device)
        meta["devices"] = {str(args.device): (
            f"{p.name}, {p.total_memory / 2**30:.1f} GiB, compute {p.major}.{p.minor}, "
            f"CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, TF32 off")}
    meta.update(env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")},
                python=platform.python_version(),
                openblas_env={k: v for k, v in os.environ.items() if k.startswith("OPENBLAS")},
                started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                repeats=args.repeats, warmup=args.warmup)
    with open(os.path.join(args.out, "results.jsonl"), "w") as records:
        def write(record):
            records.write(json.dumps(record) + "\n")
            records.flush()
        # float32 as float32 on a GPU, as `vlrnn compare` measures it (NOTE [ Float32
        # without TF32 ] in vlrnn/core/exact_float32.h): every peer at one precision.
        with _C.ExactFloat32():
            for name in chosen:
                measure(name, factories[name], args, write)
    meta["load_average_end"] = results_writer.load_average()
    meta["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    results_writer.write_meta(args.out, meta)
    print(f"wrote {args.out}/results.jsonl and meta.json; draw: python3 scripts/plot.py {args.out}")


if __name__ == "__main__":
    main()
