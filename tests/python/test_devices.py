"""Where the modules and the batch live: the device is theirs, nothing moves unasked, and a
call that mixes devices is refused naming the argument. The meta device stands in for a
second device on the CPU; the cases marked `cuda` run where CUDA is (the device check's
pytest) and are skipped elsewhere.
Shapes: B = batch, T = steps, F = input features, H = hidden."""
import pytest
import torch
from torch import nn

import vlrnn
from conftest import CLASSES, F, H, MlpHead, grads, make_batch, max_rel_diff
from vlrnn.nn import stock_engine_model

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_a_batch_on_another_device_than_the_parameters_is_refused():
    rnn, out = nn.LSTM(F, H, batch_first=True), MlpHead(H, CLASSES)
    x, y = make_batch(False, dtype=torch.float32)
    model = vlrnn.VLRNN(rnn, out, "MEAN", N=2)
    with pytest.raises(ValueError, match=r"rnn parameter weight_ih_l0: on cpu, x on meta; put "
                                         r"both on one device \(e.g. rnn.to\(x.device\)\)"):
        model(x.to("meta"), y.to("meta"))
    with pytest.raises(ValueError, match="y: expected x's device cpu, got meta"):
        model(x, y.to("meta"))
    h0 = (torch.zeros(1, x.shape[0], H), torch.zeros(1, x.shape[0], H, device="meta"))
    with pytest.raises(ValueError, match=r"h0\[1\]: expected x's device cpu, got meta"):
        model(x, y, h0)
    # The modules of vlrnn.nn check their input and hx alike.
    for module in (vlrnn.nn.MinGRU(F, H), vlrnn.nn.LSTM(F, H), vlrnn.nn.GRU(F, H)):
        name = type(module).__name__
        with pytest.raises(ValueError, match=f"{name} input: expected dtype torch.float32 on "
                                             r"cpu \(the parameters'\), got torch.float32 on "
                                             "meta"):
            module(x.to("meta"))
        state = torch.zeros(1, x.shape[1], H, device="meta")
        with pytest.raises(ValueError, match=rf"{name} hx\[0\]: expected dtype torch.float32 "
                                             "on cpu"):
            module(x, (state, state) if name == "LSTM" else state)


def test_a_bidirectional_module_off_the_cpu_runs_as_the_cells():
    # No call of a bidirectional module computes a block, so on any device it is the
    # engine's bidirectional model; a left-to-right one off the CPU is called as it is
    # (cuDNN on a GPU).
    for rnn in (nn.LSTM(F, H, batch_first=True, bidirectional=True, device="meta"),
                nn.GRU(F, H, 2, batch_first=True, bidirectional=True, device="meta")):
        assert isinstance(stock_engine_model(rnn).model, vlrnn._C.Bidirectional)
    assert stock_engine_model(nn.LSTM(F, H, batch_first=True, device="meta")) is None
    assert stock_engine_model(nn.LSTM(F, H, batch_first=True)) is not None


def test_a_cpp_kind_refuses_a_device_its_tensors_cannot_move_to():
    rnn = vlrnn.nn.LRU(F, H)
    with pytest.raises(TypeError, match=r"LRU\('lru'\): the C\+\+ module's tensors cannot "
                                        "move to meta"):
        rnn.to("meta")
    assert all(p.device.type == "cpu" for p in rnn.parameters())
    with pytest.raises(TypeError, match="cannot move to meta"):
        vlrnn.nn.MinGRU(F, H, device="meta")


@cuda
@pytest.mark.parametrize("bidirectional", [False, True], ids=["one_way", "bidirectional"])
def test_a_cpp_kind_moves_its_own_tensors_to_the_gpu(bidirectional):
    rnn = vlrnn.nn.MinGRU(F, H, 2, batch_first=True, bidirectional=bidirectional).double()
    rnn(torch.randn(2, 5, F, dtype=torch.float64))[0].sum().backward()
    before = list(rnn.parameters())
    assert rnn.cuda() is rnn
    assert [id(p) for p in rnn.parameters()] == [id(p) for p in before]
    assert all(p.is_cuda and p.grad.is_cuda for p in before)
    assert all(t.is_cuda for _, t in rnn.cpp.named_parameters())  # what runs moved
    assert all(t.is_cuda for t in rnn.state_dict().values())
    assert rnn(torch.randn(2, 5, F, dtype=torch.float64, device="cuda"))[0].is_cuda
    assert all(p.is_cuda for p in vlrnn.nn.LRU(F, H, device="cuda").parameters())
    with pytest.raises(ValueError, match="input: expected dtype torch.float64 on cuda:0"):
        rnn(torch.randn(2, 5, F, dtype=torch.float64))


def gpu_models():
    """(name, rnn constructor, hidden width the head reads)."""
    return [
        ("nn.LSTM (cuDNN)", lambda: nn.LSTM(F, H, 2, batch_first=True), H),
        ("nn.GRU bidirectional", lambda: nn.GRU(F, H, batch_first=True, bidirectional=True),
         2 * H),
        ("vlrnn.nn.LSTM, dropout", lambda: vlrnn.nn.LSTM(F, H, 2, dropout=0.3, batch_first=True),
         H),
        ("vlrnn.nn.MinGRU bidirectional, dropout",
         lambda: vlrnn.nn.MinGRU(F, H, 2, dropout=0.3, batch_first=True, bidirectional=True),
         2 * H),
        ("vlrnn.nn.LRU", lambda: vlrnn.nn.LRU(F, H, batch_first=True), H),
    ]


@cuda
@pytest.mark.parametrize("packed", [False, True], ids=["FIXED", "PACKED"])
@pytest.mark.parametrize("name,make,width", gpu_models(), ids=[m[0] for m in gpu_models()])
def test_vlrnn_on_the_gpu_matches_full_bptt(name, make, width, packed):
    # Full BPTT is PlainRNN's loss.backward() on the same GPU, in float64; dropout's
    # masks are replayed from the CUDA generator.
    torch.manual_seed(0)
    rnn, out = make().double().cuda(), MlpHead(width, CLASSES).double().cuda()
    x, y = make_batch(packed)
    x, y = x.to("cuda"), y.to("cuda")
    results = []
    for run in (vlrnn.PlainRNN(rnn, out, "MEAN"), vlrnn.VLRNN(rnn, out, "MEAN", N=4)):
        rnn.zero_grad(), out.zero_grad()
        torch.manual_seed(5)
        loss, _, _ = run(x, y)
        if isinstance(run, vlrnn.VLRNN):
            assert run.last_counters["forward_no_grad"] > 0
        else:
            loss.backward()
        results.append((loss.item(), grads([rnn, out])))
    (loss_ref, g_ref), (loss, g) = results
    assert all(t is not None and t.is_cuda for t in g)
    assert abs(loss - loss_ref) <= 1e-10 * abs(loss_ref)
    assert max_rel_diff(g, g_ref) < 1e-10


@cuda
def test_verify_proves_every_exact_method_on_the_gpu():
    # vlrnn.verify's rows on a GPU: a bidirectional C++ kind with dropout (bivlrnn,
    # checkpoint) and cuDNN's nn.GRU called per block (every left-to-right method).
    x, y = (t.to("cuda") for t in make_batch(True))
    cases = [(vlrnn.nn.MinGRU(F, H, 2, dropout=0.3, batch_first=True, bidirectional=True),
              2 * H), (nn.GRU(F, H, batch_first=True), H)]
    for rnn, width in cases:
        vlrnn.assert_exact(rnn.double().cuda(), MlpHead(width, CLASSES).double().cuda(), x, y)


@cuda
def test_a_stream_on_the_gpu_equals_backward_on_the_whole_stream():
    torch.manual_seed(0)
    rnn = vlrnn.nn.LSTM(F, H, 2, dropout=0.3, batch_first=True).double().cuda()
    out = MlpHead(H, CLASSES).double().cuda()
    x, y = (t.to("cuda") for t in make_batch(False, steps=17))
    results = []
    for streamed in (False, True):
        rnn.zero_grad(), out.zero_grad()
        torch.manual_seed(8)
        if streamed:
            stream = vlrnn.Stream(rnn, out, "MEAN", slots=3)
            loss = stream.run(zip(x.split(5, dim=1), y.split(5, dim=1)))[0]
        else:
            loss = vlrnn.PlainRNN(rnn, out, "MEAN")(x, y)[0]
            loss.backward()
        results.append((loss.item(), grads([rnn, out])))
    (loss_ref, g_ref), (loss, g) = results
    assert abs(loss - loss_ref) <= 1e-10 * abs(loss_ref)
    assert max_rel_diff(g, g_ref) < 1e-10
