"""vlrnn.verify returns the rows `vlrnn verify` prints, and catches a module that breaks the
contract (with the plain-words diagnosis)."""
import warnings

import pytest
import torch
from torch import nn

import vlrnn
from conftest import F, H, CLASSES, FirstStepOfEachCallDetached, MlpHead, make_batch, \
    make_rnn


@pytest.mark.parametrize("packed", [False, True], ids=["FIXED", "PACKED"])
def test_every_default_method_passes_on_a_composite_with_dropout(packed):
    rnn, out = make_rnn("vlrnn_nn_composite", dropout=0.2), MlpHead(H, CLASSES).double()
    x, y = make_batch(packed, steps=20)
    report = vlrnn.assert_exact(rnn, out, x, y)
    assert [row.method for row in report] == list(vlrnn.DEFAULT_METHODS)
    assert all(row.passed and row.exact and row.max_rel < 1e-10 for row in report)
    assert report.passed and not report.failures()
    text = str(report)
    assert "Composite" in text and "passed" in text and "vlrnn:num_blocks=7" in text


def test_approximate_methods_are_reported_not_failed():
    rnn, out = make_rnn("gru"), MlpHead(H, CLASSES).double()
    x, y = make_batch(False, steps=20)
    report = vlrnn.verify(rnn, out, x, y, methods=["tbptt:k=3", "vlrnn:block_length=4"])
    tbptt, blocks = report
    assert not tbptt.exact and tbptt.max_rel > 1e-6 and 0 < tbptt.grad_cosine < 1
    assert blocks.exact and blocks.passed
    report.assert_exact()


class CallMaskDropout(vlrnn.RNNModule):
    """Variational dropout with one [B, H] mask per forward() call: a block method cuts the
    sequence into several calls, so the masks depend on where it is cut."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(F, H, batch_first=True)

    def forward(self, x, h):
        z, h = self.gru(x, h)
        mask = torch.bernoulli(torch.full((z.shape[0], 1, z.shape[2]), 0.7, dtype=z.dtype))
        return z * mask / 0.7, h


def test_per_call_masks_fail_with_the_diagnosis():
    rnn, out = CallMaskDropout().double(), MlpHead(H, CLASSES).double()
    x, y = make_batch(False, steps=20)
    report = vlrnn.verify(rnn, out, x, y, methods=["vlrnn:num_blocks=4"])
    (row,) = report
    assert row.exact and not row.passed and row.max_rel > 1e-3
    assert "depend on where the sequence is cut" in row.diagnosis
    with pytest.raises(AssertionError, match="gradients differ from full BPTT"):
        report.assert_exact()


class TimeMajorCallMask(nn.Module):
    """One [T, B, H] mask per call, drawn time-major: on this CPU's generator the same
    numbers as per-step [B, H] draws, so block methods pass here; elsewhere they need not."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(F, H, batch_first=True)

    def forward(self, x, h):
        z, h = self.gru(x, h)  # [B, T, H]
        keep = torch.full((z.shape[1], z.shape[0], z.shape[2]), 0.7, dtype=z.dtype)
        mask = torch.bernoulli(keep).transpose(0, 1)  # [T, B, H] drawn, used as [B, T, H]
        return z * mask / 0.7, h


def test_per_call_draws_that_pass_here_are_warned_about():
    x, y = make_batch(False, steps=20)
    torch.manual_seed(0)
    with pytest.warns(RuntimeWarning, match="vlrnn.verify: the model draws its random "
                                            "numbers .* once per forward\\(\\) call"):
        report = vlrnn.verify(TimeMajorCallMask().double(), MlpHead(H, CLASSES).double(), x,
                              y, methods=["vlrnn:num_blocks=4", "checkpoint"])
    assert report.passed
    assert "GPU" in report.warning
    assert str(report).startswith("WARNING: ")
    torch.manual_seed(0)
    per_step = vlrnn.verify(make_rnn("vlrnn_nn_composite", dropout=0.3),  # per-step masks
                            MlpHead(H, CLASSES).double(), x, y, methods=["vlrnn:num_blocks=4"])
    assert per_step.passed and per_step.warning == ""


def test_stock_multi_layer_dropout_is_diagnosed():
    """torch.nn.LSTM draws one mask per layer and call ([T, B, H]): cut into blocks, the
    layers' draws interleave differently, so no block method can be exact for it."""
    rnn, out = make_rnn("composite", dropout=0.3), MlpHead(H, CLASSES).double()
    x, y = make_batch(False, steps=20)
    report = vlrnn.verify(rnn, out, x, y, methods=["vlrnn:num_blocks=2", "full"])
    cut, whole = report
    assert not cut.passed and "depend on where the sequence is cut" in cut.diagnosis
    assert whole.passed


def test_bad_method_lists_are_rejected():
    rnn, out = make_rnn("gru"), MlpHead(H, CLASSES).double()
    x, y = make_batch(False, steps=10)
    with pytest.raises(TypeError, match="methods: expected a list of method specs"):
        vlrnn.verify(rnn, out, x, y, methods="vlrnn")
    with pytest.raises(ValueError, match="nonsense"):
        vlrnn.verify(rnn, out, x, y, methods=["nonsense"])


def test_a_bridge_misreading_a_repacked_output_is_caught_and_its_cause_named(monkeypatch):
    """The bridge as it was before reading a returned PackedSequence through its own indices
    (planted: z's rows read in its batch's order, its sorted_indices ignored): verify fails
    the module that packs its own output, and names what the module did."""
    from test_module_contract import LinearHead, RepackingCellLoop, packed_batch
    import vlrnn._adapters as adapters
    from vlrnn._sequences import packed_rows
    monkeypatch.setattr(adapters, "unpacked_rows",
                        lambda z, members: packed_rows(z.batch_sizes, members))
    x, y = packed_batch()
    report = vlrnn.verify(RepackingCellLoop().double(), LinearHead().double(), x, y,
                          methods=["vlrnn:num_blocks=2", "vlrnn:num_blocks=7", "full"])
    assert [row.passed for row in report] == [False, False, True]
    cause = "output PackedSequence is packed in another order than its input"
    assert all(cause in row.diagnosis for row in report.failures())
    assert cause in str(report)
    monkeypatch.undo()  # the bridge as it is: exact, and the same note says what it did
    fixed = vlrnn.verify(RepackingCellLoop().double(), LinearHead().double(), x, y,
                         methods=["vlrnn:num_blocks=2", "vlrnn:num_blocks=7"])
    assert fixed.passed and any(cause in note for note in fixed.notes)


def test_the_gradient_of_x_is_compared():
    """Passed before: the verifier read dL/dx from the time-major view of x, no leaf, so it
    compared zeros with zeros (and warned 12 times that .grad of a non-leaf was read)."""
    rnn, out = FirstStepOfEachCallDetached(F, H).double(), MlpHead(H, CLASSES).double()
    x, y = make_batch(False, steps=20)
    x.requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to say about a well-formed call
        report = vlrnn.verify(rnn, out, x, y, methods=["vlrnn:num_blocks=4"])
    (row,) = report
    assert not row.passed and row.worst == "grad inputs" and row.max_rel > 0.1
    # Where x needs no gradient, nothing differs.
    assert vlrnn.verify(rnn, out, x.detach(), y, methods=["vlrnn:num_blocks=4"]).passed


def test_a_bfloat16_model_verifies_to_its_rounding_and_a_wrong_one_fails():
    # Before, every row failed against float32's 1e-5, labelled f32.
    torch.manual_seed(0)
    rnn, out = nn.GRU(F, H, batch_first=True).to(torch.bfloat16), \
        MlpHead(H, CLASSES).to(torch.bfloat16)
    x, y = make_batch(False, steps=20)
    report = vlrnn.verify(rnn, out, x.to(torch.bfloat16), y)
    assert report.passed, str(report)
    assert all("/bf16/" in row.case and row.tolerance == 0.03125 for row in report)
    wrong = vlrnn.verify(FirstStepOfEachCallDetached(F, H).to(torch.bfloat16), out,
                         x.to(torch.bfloat16).requires_grad_(), y)
    assert not wrong.passed
