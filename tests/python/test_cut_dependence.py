"""Modules whose outputs depend on where the sequence is cut are refused by VLRNN with the
reason, never run approximately: those the package recognises (torch.nn's multi-layer RNNs
with dropout, parts that change buffers as they run), and the rest by the first-call check
(check_cuts). vlrnn.verify still runs them all, and shows the error."""
import warnings

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import (PackedSequence, pack_padded_sequence, pack_sequence,
                                pad_packed_sequence)

import vlrnn
from conftest import CellLoop, CrossEntropyHead, FirstStepOfEachCallDetached, grads, \
    max_rel_diff

F, H, CLASSES = 3, 8, 4


class Head(CrossEntropyHead):
    def __init__(self):
        super().__init__(H, CLASSES)


def batch(packed=False, B=5, T=30):
    g = torch.Generator().manual_seed(0)
    if packed:
        lengths = [30, 17, 22, 30, 5][:B]
        x = pack_sequence([torch.randn(n, F, generator=g) for n in lengths], enforce_sorted=False)
        y = pack_sequence([torch.randint(0, CLASSES, (n,), generator=g) for n in lengths],
                          enforce_sorted=False)
        return x, y
    return torch.randn(B, T, F, generator=g), torch.randint(0, CLASSES, (B, T), generator=g)


def assert_exact_as_one_call(rnn, out, x, y, h0=None, seed=1, **call):
    """VLRNN (`call`: N or method) runs the modules, checked and not refused, with full
    BPTT's gradients (PlainRNN's, from the same generator state) to 1e-10: the parameters'
    and h0's."""
    modules = nn.ModuleList([rnn, out])
    leaves = [h0] if h0 is not None else []
    def gradients(run):
        modules.zero_grad()
        for t in leaves:
            t.grad = None
        torch.manual_seed(seed)
        run()
        return grads(modules) + [t.grad.clone() for t in leaves]
    want = gradients(lambda: vlrnn.PlainRNN(rnn, out, "SUM")(x, y, h0)[0].backward())
    got = gradients(lambda: vlrnn.VLRNN(rnn, out, "SUM")(x, y, h0, **call))
    assert max_rel_diff(got, want) < 1e-10


@pytest.mark.parametrize("fast_cells", [True, False])
def test_a_three_layer_lstm_with_dropout_is_refused_with_what_to_use(fast_cells):
    # Ran before with 55 % relative error on one gradient and no word.
    rnn = nn.LSTM(F, H, num_layers=3, dropout=0.2, batch_first=True)
    x, y = batch()
    with pytest.raises(ValueError) as raised:
        vlrnn.VLRNN(rnn, Head(), "MEAN", fast_cells=fast_cells)(x, y, None, N=4)
    for words in ("rnn is a torch.nn.LSTM in training mode with dropout 0.2", "once per call",
                  "vlrnn.nn.LSTM", "method='full'"):
        assert words in str(raised.value)
    assert all(p.grad is None for p in rnn.parameters())


def test_a_two_layer_lstm_with_dropout_is_exact_here_and_warned_about():
    """One dropout layer: the calls per block draw, on this CPU, what one call draws (verify
    passes it), which holds on no GPU: the first-call check says so."""
    torch.manual_seed(0)
    rnn, out = nn.LSTM(F, H, num_layers=2, dropout=0.2, batch_first=True).double(), \
        Head().double()
    x, y = batch(packed=True)
    x = x.to(torch.float64)
    modules = nn.ModuleList([rnn, out])
    torch.manual_seed(1)
    vlrnn.PlainRNN(rnn, out, "SUM")(x, y)[0].backward()
    want = grads(modules)
    modules.zero_grad()
    torch.manual_seed(1)
    with pytest.warns(RuntimeWarning, match="does not carry over"):
        vlrnn.VLRNN(rnn, out, "SUM")(x, y, None, N=4)
    assert max_rel_diff(grads(modules), want) < 1e-10


def test_a_packed_gru_with_dropout_inside_a_module_is_refused():
    class Wrapper(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.GRU(F, H, num_layers=3, dropout=0.3, batch_first=True)

        def forward(self, x, h):
            return self.inner(x, h)
    x, y = batch(packed=True)
    with pytest.raises(ValueError, match=r"rnn.inner is a torch.nn.GRU in training mode with "
                                         r"dropout 0.3 between its 3 layers"):
        vlrnn.VLRNN(Wrapper(), Head(), "SUM")(x, y, None, N=4)


def test_the_same_stack_in_eval_mode_or_as_one_call_is_exact():
    torch.manual_seed(0)
    rnn, out = nn.LSTM(F, H, num_layers=3, dropout=0.2, batch_first=True).double(), \
        Head().double()
    x, y = batch()
    x = x.double()
    for mode, spec in ((False, dict(N=4)), (True, dict(method="full"))):
        rnn.train(mode)
        assert_exact_as_one_call(rnn, out, x, y, **spec)


def test_spectral_norm_while_training_is_refused_by_its_buffers():
    rnn = CellLoop(nn.utils.spectral_norm(nn.RNNCell(F, H), name="weight_hh"))
    x, y = batch()
    u = rnn.cell.weight_hh_u.clone()
    with pytest.raises(ValueError, match=r"rnn.cell.weight_hh_u, rnn.cell.weight_hh_v changed when the modules ran.*"
                                         r"spectral_norm's power iteration"):
        vlrnn.VLRNN(rnn, Head(), "MEAN")(x, y, None, N=3)
    assert torch.equal(rnn.cell.weight_hh_u, u)  # the probe put it back
    rnn.eval()  # no power iteration: exact, and runs
    vlrnn.VLRNN(rnn, Head(), "MEAN")(x, y, None, N=3)


def test_batch_norm_in_the_head_while_training_is_refused():
    class NormedHead(Head):
        def __init__(self):
            super().__init__()
            self.norm = nn.BatchNorm1d(H)

        def forward(self, z, y):
            return super().forward(self.norm(z.transpose(1, 2)).transpose(1, 2), y)
    x, y = batch()
    with pytest.raises(ValueError, match=r"out.norm.running_var, out.norm.num_batches_tracked changed"):
        vlrnn.VLRNN(nn.GRU(F, H, batch_first=True), NormedHead(), "MEAN")(x, y, None, N=3)


class PerCallDropout(nn.Module):
    """A GRU whose output gets one dropout mask per call over [B, T, H]: other masks for
    other cuts, which nothing in its structure says."""

    def __init__(self):
        super().__init__()
        self.gru, self.drop = nn.GRU(F, H, batch_first=True), nn.Dropout(0.5)

    def forward(self, x, h):
        z, h = self.gru(x, h)
        # batch-major memory: a GRU's own z may be a time-major view (2.x), whose mask the
        # generator would lay out as per-step masks on the CPU
        return self.drop(z.contiguous()), h


def test_the_first_call_check_refuses_what_the_structure_does_not_show():
    x, y = batch()
    model = vlrnn.VLRNN(PerCallDropout(), Head(), "MEAN", N=3)
    with pytest.raises(ValueError, match=r"refused, its gradient would not be exact: the "
                                         r"model's outputs depend on where the sequence is cut.*"
                                         r"check_cuts"):
        model(x, y)
    unchecked = vlrnn.VLRNN(PerCallDropout(), Head(), "MEAN", N=3, check_cuts=False)
    unchecked(x, y)  # the caller's choice, and vlrnn.verify shows its error
    report = vlrnn.verify(PerCallDropout().double(), Head().double(), x.double(), y)
    assert not report.passed


def test_the_first_call_check_sees_a_head_drawing_per_call():
    class DropHead(Head):
        def forward(self, z, y):
            return super().forward(nn.functional.dropout(z.contiguous(), 0.5), y)
    x, y = batch()
    with pytest.raises(ValueError, match=r"the head's per-step losses depend on where the "
                                         r"sequence is cut"):
        vlrnn.VLRNN(nn.GRU(F, H, batch_first=True), DropHead(), "MEAN", N=3)(x, y)


def test_the_first_call_check_runs_once_per_training_mode(monkeypatch):
    checks = []
    import vlrnn.modules as modules
    real = modules.cut_dependence
    monkeypatch.setattr(modules, "cut_dependence", lambda call: checks.append(1) or real(call))
    rnn = nn.GRU(F, H, batch_first=True)
    model = vlrnn.VLRNN(rnn, Head(), "MEAN", N=3, fast_cells=False)
    x, y = batch()
    for _ in range(3):
        model(x, y)
    assert len(checks) == 1
    rnn.eval()
    model(x, y)
    assert len(checks) == 2


def test_a_pass_that_holds_only_for_this_generator_warns():
    class TimeMajorDropout(PerCallDropout):
        def forward(self, x, h):  # one [T, B, H] mask per call: T masks of [B, H] on this CPU
            z, h = self.gru(x, h)
            return self.drop(z.transpose(0, 1)).transpose(0, 1), h
    x, y = batch()
    with pytest.warns(RuntimeWarning, match="once per forward\\(\\) call"):
        vlrnn.VLRNN(TimeMajorDropout(), Head(), "MEAN", N=3)(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once checked, no second warning
        model = vlrnn.VLRNN(TimeMajorDropout(), Head(), "MEAN", N=3)
        with pytest.warns(RuntimeWarning):
            model(x, y)
        model(x, y)


def docs_check_snippet():
    """docs/python.md's example of the first-call check (the python block after 'What a
    module may return')."""
    import pathlib
    page = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md").read_text()
    after = page.split("\n## What a module may return, and what VLRNN checks\n")[1]
    return after.split("```python\n")[1].split("```")[0]


def test_the_docs_first_call_check_example_runs_as_it_says():
    snippet = docs_check_snippet()
    x, y = batch()
    scope = dict(vlrnn=vlrnn, rnn=nn.GRU(F, H, batch_first=True), out=Head(), x=x, y=y)
    exec(snippet, scope)  # a module whose outputs do not depend on the cut: it runs
    assert scope["loss"].shape == ()
    scope.update(rnn=PerCallDropout())
    with pytest.raises(ValueError, match="depend on where the sequence is cut"):
        exec(snippet, scope)


def packed_batch(lengths):
    g = torch.Generator().manual_seed(0)
    x = pack_sequence([torch.randn(n, F, generator=g) for n in lengths], enforce_sorted=False)
    y = pack_sequence([torch.randint(0, CLASSES, (n,), generator=g) for n in lengths],
                      enforce_sorted=False)
    return x, y


class CentredOverTheBatch(nn.Module):
    """A GRU whose output is centred over the batch of its padded output: an ended
    sequence's zero padding counts in one call on the whole batch, and is absent from a
    block of the sequences still running."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(F, H, batch_first=True)

    def forward(self, x, h):
        z, h = self.gru(x, h)
        if not isinstance(z, PackedSequence):
            return z - z.mean(0, keepdim=True), h
        padded, lengths = pad_packed_sequence(z, batch_first=True)
        padded = padded - padded.mean(0, keepdim=True)
        return pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False), h


class CentredOverTheSequencesOfEachStep(CentredOverTheBatch):
    """The same over the sequences the PackedSequence holds at each step: what a block of
    the sequences still running computes too."""

    def forward(self, x, h):
        z, h = self.gru(x, h)
        steps = torch.split(z.data, z.batch_sizes.tolist())
        data = torch.cat([step - step.mean(0, keepdim=True) for step in steps])
        return PackedSequence(data, z.batch_sizes, z.sorted_indices, z.unsorted_indices), h


@pytest.mark.parametrize("lengths", [[30, 20, 25, 12], [30, 28, 25, 22]])
def test_a_module_computing_across_the_padded_batch_is_refused(lengths):
    """Ran before with 18 % relative error on the loss and no word: within the check's 32
    steps the second batch has no sequence ending by the cut, so the check ends one there."""
    x, y = packed_batch(lengths)
    model = vlrnn.VLRNN(CentredOverTheBatch(), Head(), "MEAN", N=4)
    with pytest.raises(ValueError, match=r"refused, its gradient would not be exact: the rnn's "
                                         r"outputs for a sequence depend on which other "
                                         r"sequences share its call.*check_cuts"):
        model(x, y)
    report = vlrnn.verify(CentredOverTheBatch().double(), Head().double(),
                          x.to(torch.float64), y)
    assert not report.passed  # a wrong gradient, which the refusal prevents


def test_across_the_batch_is_exact_where_no_sequence_leaves_the_calls():
    """Batch-first, every block holds the whole batch: run, and the same as full BPTT."""
    torch.manual_seed(0)
    rnn, out = CentredOverTheBatch().double(), Head().double()
    x, y = batch()
    assert_exact_as_one_call(rnn, out, x.double(), y, N=4)
    # The check of a batch-first call does not stand for a packed one: that one refuses.
    model = vlrnn.VLRNN(CentredOverTheBatch(), Head(), "MEAN", N=4)
    model(*batch())
    with pytest.raises(ValueError, match=r"depend on which other sequences share its call"):
        model(*packed_batch([30, 28, 25, 22]))


def test_across_the_sequences_of_each_step_is_exact_on_a_packed_batch():
    torch.manual_seed(0)
    rnn, out = CentredOverTheSequencesOfEachStep().double(), Head().double()
    x, y = packed_batch([30, 28, 25, 22])
    assert_exact_as_one_call(rnn, out, x.to(torch.float64), y, N=4)


class FastPathWithoutGradients(CellLoop):
    """A GRU cell loop with a path of its own under torch.no_grad() that is not quite the
    same function (as inference fast paths may be): the same under any cut."""

    def __init__(self, off_by=1e-3):
        super().__init__(nn.GRUCell(F, H))
        self.off_by = off_by

    def step(self, h):
        return h if torch.is_grad_enabled() else h * (1 + self.off_by)


def test_a_module_computing_another_function_without_gradients_is_refused():
    """Ran before with 2.5e-4 relative error on its gradients and no word: the states the
    pass without gradients stores are not those the recomputed blocks would reach."""
    x, y = batch()
    with pytest.raises(ValueError, match=r"refused, its gradient would not be exact: the rnn "
                                         r"computes another function without gradients.*"
                                         r"check_cuts"):
        vlrnn.VLRNN(FastPathWithoutGradients(), Head(), "MEAN", N=3)(x, y)
    report = vlrnn.verify(FastPathWithoutGradients().double(), Head().double(), x.double(), y)
    assert not report.passed  # a wrong gradient, which the refusal prevents
    # One function in both modes (off_by 0) is exact, and runs.
    torch.manual_seed(0)
    rnn, out = FastPathWithoutGradients(off_by=0.0).double(), Head().double()
    assert_exact_as_one_call(rnn, out, x.double(), y, N=3)


class DetachesItsState(nn.Module):
    """A GRU that detaches the state it is given, as truncated BPTT does between calls: cut
    or whole, the same outputs, but no gradient crosses the start of a call."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(F, H, batch_first=True)

    def forward(self, x, h):
        return self.gru(x, None if h is None else h.detach())


class StraightThroughState(CellLoop):
    """A GRU cell loop rounding its state straight through (a stop-gradient inside the
    step): the same function of the entry state cut or whole, so no cut changes its
    gradient."""

    def __init__(self):
        super().__init__(nn.GRUCell(F, H))

    def step(self, h):
        return h + (torch.round(h * 8) / 8 - h).detach()


@pytest.mark.parametrize("packed", [False, True])
def test_a_module_detaching_its_entry_state_is_refused(packed):
    """Ran before with 18 % (4 blocks) to 30 % (the planner) relative error on its gradients
    and no word: its outputs agree under any cut, only its gradients do not."""
    x, y = batch(packed)
    with pytest.raises(ValueError, match=r"refused, its gradient would not be exact: the rnn's "
                                         r"gradients depend on where the sequence is cut.*"
                                         r"h\.detach\(\).*check_cuts"):
        vlrnn.VLRNN(DetachesItsState(), Head(), "MEAN", N=3)(x, y)
    with pytest.raises(ValueError, match=r"Stream: refused.*the rnn's gradients depend"):
        vlrnn.Stream(DetachesItsState(), Head()).push(*batch())  # batch-first only
    x, y = batch()
    report = vlrnn.verify(DetachesItsState().double(), Head().double(), x.double(), y)
    assert not report.passed  # a wrong gradient, which the refusal prevents


class DetachesHalfItsState(nn.Module):
    """Two GRUs side by side, the state one of each: the second detaches its own. The first
    one's gradients cross the cut, the second one's stop there."""

    def __init__(self):
        super().__init__()
        self.passing = nn.GRU(F, H // 2, batch_first=True)
        self.stopping = nn.GRU(F, H // 2, batch_first=True)

    def forward(self, x, h):
        a, b = (None, None) if h is None else h
        za, ha = self.passing(x, a)
        zb, hb = self.stopping(x, None if b is None else b.detach())
        return torch.cat([za, zb], -1), (ha, hb)


def test_in_bfloat16_a_module_passing_its_state_runs_and_one_detaching_it_is_refused():
    """NOTE [ Half precision and the cut ]: bfloat16's rounding alone moved the chained
    gradients 1.8e-2 from one call's, and every torch.nn module was refused there."""
    x, y = batch()
    x = x.to(torch.bfloat16)
    torch.manual_seed(0)
    rnn, out = nn.GRU(F, H, batch_first=True).to(torch.bfloat16), Head().to(torch.bfloat16)
    vlrnn.PlainRNN(rnn, out, "MEAN")(x, y)[0].backward()
    want = torch.cat([p.grad.flatten().float() for p in [*rnn.parameters(), *out.parameters()]])
    rnn.zero_grad(set_to_none=True), out.zero_grad(set_to_none=True)
    vlrnn.VLRNN(rnn, out, "MEAN", N=3)(x, y)
    got = torch.cat([p.grad.flatten().float() for p in [*rnn.parameters(), *out.parameters()]])
    assert ((got - want).norm() / want.norm()).item() < 2 * 2.0 ** -7  # bfloat16's ε
    with pytest.raises(ValueError, match=r"the rnn's gradients depend on where the sequence "
                                         r"is cut.*h\.detach\(\)"):
        vlrnn.VLRNN(DetachesItsState().to(torch.bfloat16), out, "MEAN", N=3)(x, y)
    # Each tensor apart: the GRU whose gradient stops is refused beside one whose crosses.
    with pytest.raises(ValueError, match=r"the rnn's gradients depend on where the sequence "
                                         r"is cut"):
        vlrnn.VLRNN(DetachesHalfItsState().to(torch.bfloat16), out, "MEAN", N=3)(x, y)


def test_a_module_cutting_the_gradient_of_its_first_input_step_is_refused_for_dl_dx():
    """dL/dx (to an encoder before the rnn) ran before 76 % off, and no word: the module
    takes no gradient into the first step of each call, so blocks lose one per cut."""
    x, y = batch()
    x.requires_grad_()
    with pytest.raises(ValueError, match=r"the rnn's gradients depend on where the sequence "
                                         r"is cut.*its entry state and x from one call"):
        vlrnn.VLRNN(FirstStepOfEachCallDetached(F, H), Head(), "MEAN", N=3)(x, y)
    # Where no dL/dx is asked for, its gradients are exact: it runs.
    torch.manual_seed(0)
    rnn, out = FirstStepOfEachCallDetached(F, H).double(), Head().double()
    assert_exact_as_one_call(rnn, out, x.detach().double(), y, N=3)


def test_a_stop_gradient_inside_the_step_is_exact_and_runs():
    torch.manual_seed(0)
    rnn, out = StraightThroughState().double(), Head().double()
    x, y = batch()
    h0 = torch.randn(1, x.shape[0], H, dtype=torch.float64, requires_grad=True)
    assert_exact_as_one_call(rnn, out, x.double(), y, h0, N=4)
