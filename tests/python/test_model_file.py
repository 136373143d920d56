"""A TorchScript model file of `vlrnn verify --model-file` works from Python: trained with
VLRNN, verified exact (its per-step dropout included), and bad files are named."""
import pathlib
import subprocess
import sys

import pytest
import torch
from torch import nn

import vlrnn
from conftest import CLASSES, MlpHead, grads, make_batch, max_rel_diff

EXPORT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "export_cell.py"


@pytest.fixture(scope="module")
def cell_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cell") / "cell.pt"
    subprocess.run([sys.executable, str(EXPORT), str(path), "--input", "6", "--hidden", "8",
                    "--dropout", "0.2"], check=True, capture_output=True)
    return path


@pytest.mark.parametrize("packed", [False, True], ids=["FIXED", "PACKED"])
def test_model_file_trains_with_vlrnn_and_matches_full_bptt(cell_file, packed):
    rnn, out = vlrnn.ModelFile(cell_file), MlpHead(8, CLASSES)
    rnn.eval()  # dropout off: PlainRNN and VLRNN need no common generator state
    x, y = make_batch(packed, torch.float32)
    loss_ref, _, h_ref = vlrnn.PlainRNN(rnn, out, "SUM")(x, y, None)
    loss_ref.backward()
    g_ref = grads([rnn, out])
    assert len(g_ref) == 8 and all(g is not None for g in g_ref)  # LSTMCell 4, MLP 4
    rnn.zero_grad(), out.zero_grad()
    loss, _, h = vlrnn.VLRNN(rnn, out, "SUM", N=4)(x, y, None)
    assert max_rel_diff(grads([rnn, out]), g_ref) < 1e-5
    assert [list(t.shape) for t in h] == [[8, 5], [8, 5]]  # batch moved to dim 1


def test_model_file_with_dropout_is_exact(cell_file):
    rnn, out = vlrnn.ModelFile(cell_file), MlpHead(8, CLASSES)
    x, y = make_batch(True, torch.float32)
    vlrnn.assert_exact(rnn, out, x, y)


def test_bad_files_are_named(tmp_path):
    with pytest.raises(ValueError, match="found no file"):
        vlrnn.ModelFile(tmp_path / "missing.pt")
    junk = tmp_path / "junk.pt"
    junk.write_text("not a model")
    with pytest.raises(ValueError, match="is not a TorchScript module file"):
        vlrnn.ModelFile(junk)
    plain = tmp_path / "plain.pt"
    torch.jit.script(nn.Linear(2, 2)).save(str(plain))
    with pytest.raises(ValueError, match="found no input_size"):
        vlrnn.ModelFile(plain)
    with pytest.raises(TypeError, match="path: expected a file name, got int"):
        vlrnn.ModelFile(3)
