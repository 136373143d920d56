"""The linear recurrences as PyTorch modules (vlrnn.nn.MinGRU, MinLSTM, LRU, SelectiveSSM):
parameters, state_dict and dtype conversion as torch.nn's modules have them, torch.nn's
forward conventions, and VLRNN's gradients equal to full BPTT under loss.backward()."""
import pytest
import torch
from torch.nn.utils.rnn import pack_sequence, pad_packed_sequence

import vlrnn
from conftest import CLASSES, F, H, MlpHead, grads, make_batch, max_rel_diff

KINDS = {"MinGRU": 1, "MinLSTM": 1, "LRU": 2, "SelectiveSSM": 1}  # state tensors
TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-5}


def make(kind, **kwargs):
    return getattr(vlrnn.nn, kind)(F, H, **kwargs)


def as_tuple(h):
    return h if isinstance(h, tuple) else (h,)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("packed", [False, True], ids=["FIXED", "PACKED"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["one_way", "bidirectional"])
def test_vlrnn_matches_full_bptt(kind, dtype, packed, bidirectional):
    # Two layers with dropout drawn per step, training: full BPTT is PlainRNN's
    # loss.backward() through the module, VLRNN the engine on the C++ module in blocks
    # (bidirectional: two stacked bidirectional layers, by bivlrnn, which VLRNN picks).
    torch.manual_seed(0)
    rnn = make(kind, num_layers=2, dropout=0.25, batch_first=True, dtype=dtype,
               bidirectional=bidirectional)
    out = MlpHead(2 * H if bidirectional else H, CLASSES).to(dtype)
    x, y = make_batch(packed, dtype=dtype)
    model = vlrnn.VLRNN(rnn, out, "MEAN", N=4)
    assert model.method_for() == ("bivlrnn" if bidirectional else "vlrnn") + ":num_blocks=4"
    results = []
    for run in (vlrnn.PlainRNN(rnn, out, "MEAN"), model):
        rnn.zero_grad(), out.zero_grad()
        torch.manual_seed(5)
        loss, _, h = run(x, y)
        if run is model:
            assert model.last_counters["forward_no_grad"] > 0  # the blocks' no-grad pass ran
        else:
            loss.backward()
        results.append((loss.item(), grads([rnn, out]), [t.detach() for t in as_tuple(h)]))
    (loss_ref, g_ref, h_ref), (loss, g, h) = results
    tolerance = TOLERANCE[dtype]
    assert all(t is not None for t in g_ref)
    assert abs(loss - loss_ref) <= tolerance * abs(loss_ref)
    assert max_rel_diff(g, g_ref) < tolerance
    assert max_rel_diff(h, h_ref) < tolerance
    batch = int(x.batch_sizes[0]) if packed else x.shape[0]
    layers = 4 if bidirectional else 2  # torch.nn's [L * directions, B, W]
    assert len(h) == KINDS[kind] and list(h[0].shape[:2]) == [layers, batch]


@pytest.mark.parametrize("kind", KINDS)
def test_torch_nn_conventions(kind):
    torch.manual_seed(0)
    rnn = make(kind, num_layers=2, dtype=torch.float64)
    assert isinstance(rnn, torch.nn.Module)
    names = [n for n, _ in rnn.named_parameters()]
    assert names and list(rnn.state_dict()) == names
    assert all(p.requires_grad for p in rnn.parameters())
    x = torch.randn(9, 3, F, dtype=torch.float64)  # [T, B, F]
    z, h = rnn(x)
    assert list(z.shape) == [9, 3, H]
    assert len(as_tuple(h)) == KINDS[kind] and as_tuple(h)[0].shape[:2] == (2, 3)
    # batch_first is the same function on the transposed tensors, and hx carries on.
    twin = make(kind, num_layers=2, batch_first=True, dtype=torch.float64)
    twin.load_state_dict(rnn.state_dict())
    z_bf, h_bf = twin(x.transpose(0, 1))
    assert torch.equal(z_bf.transpose(0, 1), z)
    z1, h1 = rnn(x[:4])
    z2, h2 = rnn(x[4:], h1)
    assert max_rel_diff([torch.cat([z1, z2]), *as_tuple(h2)], [z, *as_tuple(h)]) < 1e-12
    # A packed batch: each sequence as if alone.
    packed = pack_sequence([x[:9, 0], x[:4, 1], x[:6, 2]], enforce_sorted=False)
    z_p, h_p = rnn(packed)
    padded, lengths = pad_packed_sequence(z_p)  # [T, B, H], the caller's order
    assert lengths.tolist() == [9, 4, 6]
    alone, h_alone = rnn(x[:4, 1:2])
    assert max_rel_diff([padded[:4, 1], as_tuple(h_p)[0][:, 1]],
                        [alone[:, 0], as_tuple(h_alone)[0][:, 0]]) < 1e-12
    # Plain autograd reaches every parameter.
    (z ** 2).sum().backward()
    assert all(p.grad is not None for p in rnn.parameters())


def test_dtype_conversion_is_in_place_and_optimizers_step_what_runs():
    torch.manual_seed(0)
    rnn = vlrnn.nn.MinGRU(F, H, batch_first=True)
    assert next(rnn.parameters()).dtype == torch.get_default_dtype()
    before = [p for p in rnn.parameters()]
    rnn.double()
    assert all(p.dtype == torch.float64 for p in rnn.parameters())
    assert all(a is b for a, b in zip(before, rnn.parameters()))
    z, _ = rnn(torch.randn(2, 5, F, dtype=torch.float64))
    assert z.dtype == torch.float64
    out = MlpHead(H, CLASSES).double()
    x, y = make_batch(False)
    model = vlrnn.VLRNN(rnn, out, "MEAN", N=3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_before, _, _ = model(x, y)
    optimizer.step()
    loss_after, _, _ = model(x, y)
    assert loss_after < loss_before
    copy = vlrnn.nn.MinGRU(F, H, batch_first=True, dtype=torch.float64)
    copy.load_state_dict(rnn.state_dict())
    assert torch.equal(copy(x)[0], rnn(x)[0])


def test_bad_arguments_name_what_was_expected():
    with pytest.raises(ValueError, match="hidden_size: expected > 0, got 0"):
        vlrnn.nn.MinGRU(F, 0)
    with pytest.raises(TypeError, match="MinLSTM num_layers: expected an int >= 1, got 2.0"):
        vlrnn.nn.MinLSTM(F, H, num_layers=2.0)
    with pytest.raises(ValueError, match="dropout: expected a probability in \\[0, 1\\), got 1"):
        vlrnn.nn.LRU(F, H, num_layers=2, dropout=1.0)
    with pytest.raises(TypeError, match="SelectiveSSM dropout: expected a probability"):
        vlrnn.nn.SelectiveSSM(F, H, dropout="0.1")
    with pytest.raises(TypeError, match="MinGRU dtype: expected torch.float32 or torch.float64"):
        vlrnn.nn.MinGRU(F, H, dtype=torch.float16)
    with pytest.raises(TypeError, match="MinGRU batch_first: expected True or False"):
        vlrnn.nn.MinGRU(F, H, batch_first=1)
    rnn = vlrnn.nn.MinGRU(F, H)
    with pytest.raises(TypeError, match="dtype: expected torch.float32 or torch.float64, got "
                                        "torch.float16"):
        rnn.half()
    with pytest.raises(ValueError, match="MinGRU input: expected 6 features per step, got 4"):
        rnn(torch.zeros(3, 2, 4))
    with pytest.raises(ValueError, match="MinGRU input: expected dtype torch.float32"):
        rnn(torch.zeros(3, 2, F, dtype=torch.float64))
    with pytest.raises(TypeError, match="MinGRU input: expected a tensor or a PackedSequence"):
        rnn([1, 2])
    with pytest.raises(ValueError, match=r"MinGRU hx\[0\]: expected shape \[1, 2, 8\]"):
        rnn(torch.zeros(3, 2, F), torch.zeros(2, 1, H))
    with pytest.raises(ValueError, match="LRU hx: expected a state of 2 tensor"):
        vlrnn.nn.LRU(F, H)(torch.zeros(3, 2, F), torch.zeros(1, 2, H))
    x, y = make_batch(False, dtype=torch.float32)
    with pytest.raises(ValueError, match="rnn: MinGRU has batch_first=False"):
        vlrnn.VLRNN(rnn, MlpHead(H, CLASSES))(x, y)


def test_bidirectional_is_torch_nns_layout():
    # The output at t is [forward, backward], each direction a one-layer module of the kind;
    # the backward half is that module run over the reversed sequence.
    torch.manual_seed(0)
    rnn = vlrnn.nn.MinGRU(F, H, bidirectional=True, dtype=torch.float64)
    x = torch.randn(7, 2, F, dtype=torch.float64)
    z, h = rnn(x)
    assert list(z.shape) == [7, 2, 2 * H] and list(h.shape) == [2, 2, H]
    one_way = vlrnn.nn.MinGRU(F, H, dtype=torch.float64)
    backward = {k.replace("bwd_l0_layer0", "layer0"): v for k, v in rnn.state_dict().items()
                if k.startswith("bwd_l0")}
    one_way.load_state_dict(backward)
    z_back, h_back = one_way(x.flip(0))
    assert max_rel_diff([z[..., H:], h[1]], [z_back.flip(0), h_back[0]]) < 1e-12
    with pytest.raises(TypeError, match="MinGRU bidirectional: expected True or False"):
        vlrnn.nn.MinGRU(F, H, bidirectional="yes")
    with pytest.raises(ValueError, match="dropout: expected a probability in \\[0, 1\\)"):
        vlrnn.nn.MinGRU(F, H, num_layers=2, bidirectional=True, dropout=1.5)
    with pytest.raises(ValueError, match="method: 'vlrnn' cuts the sequence"):
        x, y = make_batch(False)
        vlrnn.VLRNN(vlrnn.nn.LRU(F, H, batch_first=True, bidirectional=True, dtype=x.dtype),
                    MlpHead(2 * H, CLASSES).double(), method="vlrnn")(x, y)
