"""What help() and the package's attributes tell a user: the call's arguments and return
value on VLRNN itself, the verify report's fields, and the version."""
import inspect
import pathlib
import pydoc
import re

import vlrnn

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_help_on_vlrnn_documents_the_call_not_torchs_generic_forward():
    text = pydoc.render_doc(vlrnn.VLRNN, renderer=pydoc.plaintext)
    assert "Defines the computation performed at every call" not in text
    forward = inspect.getdoc(vlrnn.VLRNN.forward)
    for words in ("(loss, loss_seq, h)", "detached", "do not\ncall loss.backward()",
                  "[B, T, F]", "PackedSequence", "h0"):
        assert words in forward, words
    init = inspect.getdoc(vlrnn.VLRNN.__init__)
    for words in ("loss_scaling", "N:", "method:", "fast_cells:", "check_cuts:", "progress:"):
        assert words in init, words
    assert "(loss, loss_seq, h)" in inspect.getdoc(vlrnn.PlainRNN.forward)


def test_the_verify_report_documents_its_fields():
    text = inspect.getdoc(vlrnn.VerifyReport)
    for field in vlrnn.VerifyRow._fields:
        assert field in text, field
    for member in ("passed", "failures()", "assert_exact()", "warning", "notes"):
        assert member in text, member


def test_the_version_is_the_projects():
    declared = re.search(r"project\(vlrnn .*VERSION (\S+)\)",
                         (ROOT / "CMakeLists.txt").read_text()).group(1)
    assert vlrnn.__version__ == declared
