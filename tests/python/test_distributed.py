"""VLRNN under DistributedDataParallel: 2 gloo ranks × their slice of a batch give the
gradients and losses of 1 process on the whole batch (float64, 1e-10), and DDP all-reduces
once per iteration whatever the number of blocks (distributed_cases.py runs the ranks)."""
import os
import pathlib
import socket
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

import vlrnn
from conftest import max_rel_diff
from distributed_cases import CASES, F, H, build, reference, run_ranks

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch has no torch.distributed with gloo")
WORLD = 2
TOLERANCE = 1e-10


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    return run_ranks(CASES, WORLD, str(tmp_path_factory.mktemp("ranks")))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_ranks_equal_one_process_on_the_whole_batch(ranks, case):
    want = reference(case)
    got = [r[case.name] for r in ranks]
    if case.loss_scaling == "SUM":
        loss = sum(r["loss"] for r in got)
    else:
        loss = sum(r["loss"] * len(r["rows"]) for r in got) / len(case.lengths)
    assert loss == pytest.approx(want["loss"], rel=TOLERANCE)
    for rank in got:
        for name, grad in want["grads"].items():
            if name.startswith("h0"):  # each rank's sequences: their rows of dL/dh0
                grad = grad[:, rank["rows"]]
            elif case.accumulate:  # two iterations' gradients in .grad (h0 is new each)
                grad = 2 * grad
            error = max_rel_diff([rank["grads"][name]], [grad])
            assert error < TOLERANCE, f"rank {got.index(rank)} {name}: {error:.2e}"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_one_all_reduce_per_bucket_per_iteration(ranks, case):
    # DDP's own count for one forward and loss.backward(), whatever the blocks.
    for rank in ranks:
        result = rank[case.name]
        assert result["all_reduces"] == result["plain_all_reduces"] >= 1, result


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gradient_hooks_run_once_per_iteration(ranks, case):
    # As in one plain DDP backward: not once per block, nor again in the reduction's call.
    for rank in ranks:
        result = rank[case.name]
        assert result["hook_calls"] == result["plain_hook_calls"] > 0, result


def test_ranks_ran_different_block_counts(ranks):
    # The variable-length cases give the ranks different lengths (12 and 9 steps), so
    # different numbers of blocks of 3: they still met in every collective (no hang, the
    # gradients above).
    steps = [r["vlrnn:block_length=3-MEAN-variable"]["counters"]["backward"] for r in ranks]
    assert steps[0] != steps[1], steps


@pytest.mark.parametrize("compiled", [False, True], ids=["ddp", "compiled-ddp"])
def test_an_unwrapped_head_with_parameters_is_refused(tmp_path, compiled):
    if compiled and not hasattr(torch, "compile"):
        pytest.skip("torch.compile needs torch 2.x")
    # A one-rank group is enough to wrap a module.
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/rendezvous", rank=0,
                            world_size=1)
    try:
        rnn, out, x, y, _ = build(CASES[0])
        ddp = torch.nn.parallel.DistributedDataParallel(rnn)
        model = vlrnn.VLRNN(torch.compile(ddp) if compiled else ddp, out)
        with pytest.raises(ValueError, match="out: rnn is wrapped in DistributedDataParallel"):
            model(x, y)
    finally:
        dist.destroy_process_group()


EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"


def _losses(*outputs):
    # torchrun's --tee prefixes each line with its rank ("[default0]:")
    lines = [l.split(":", 1)[-1] for out in outputs for l in out.splitlines() if "step" in l]
    return [float(l.split()[-1]) for l in lines]


def _run(command, env=None):
    done = subprocess.run([sys.executable, *command], cwd=EXAMPLES, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, **(env or {})))
    return done


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# torch 2.4+ asks its TCP store for libuv, which Debian's 2.x is built without; the old
# store serves every version (USE_LIBUV=0 is how torch.distributed is told).
OLD_STORE = {"USE_LIBUV": "0"}


def test_example_on_two_ranks_trains_as_one_process():
    one = _run(["ddp_train.py"])
    assert one.returncode == 0, one.stderr
    port = str(_free_port())
    ranks = [subprocess.Popen(
        [sys.executable, "ddp_train.py"], cwd=EXAMPLES, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2",
                 MASTER_ADDR="127.0.0.1", MASTER_PORT=port, OMP_NUM_THREADS="1",
                 CUDA_VISIBLE_DEVICES="",  # the CPU's float32, as the one process has it
                 **OLD_STORE)) for r in range(2)]  # the variables torchrun sets
    outputs = [p.communicate(timeout=300) for p in ranks]
    assert all(p.returncode == 0 for p in ranks), outputs
    want, got = _losses(one.stdout), _losses(outputs[0][0])
    assert len(got) == len(want) == 7 and not _losses(outputs[1][0]), (want, outputs)
    assert got == pytest.approx(want, rel=1e-5)  # float32: one process's losses, to rounding
    assert want[-1] < 0.5 * want[0], want


def test_torchrun_runs_the_example():
    # 1.13's torchrun fails under Python 3.11 on its default --redirects (an IntFlag change);
    # naming a stream works around it.
    workaround = ["--redirects", "1", "--tee", "1"] if torch.__version__ < "2" else []
    done = _run(["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                 *workaround, "ddp_train.py"])
    if "use_libuv was requested but PyTorch was build without libuv" in done.stderr:
        pytest.skip("this torch's torchrun cannot rendezvous: it asks for libuv, which this "
                    "build lacks (pytorch/pytorch#148283; Debian's 2.x)")
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(_losses(done.stdout)) == 7, done.stdout


def test_bench_script_compares_one_and_two_processes():
    script = EXAMPLES.parents[1] / "scripts" / "bench_ddp.py"
    done = subprocess.run([sys.executable, str(script), "--repeats", "1", "--batch", "4",
                           "--steps", "20", "--hidden", "8"], env=dict(os.environ),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [l.split("|")[1].strip() for l in done.stdout.splitlines() if l.startswith("| ")]
    assert rows[1:] == ["1", "2"], done.stdout  # the header, then one row per process count
    bad = subprocess.run([sys.executable, str(script), "--world", "9", "--batch", "4"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--world" in bad.stderr, bad.stderr
