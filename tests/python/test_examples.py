"""Every example in examples/python runs as docs/python.md says."""
import os
import pathlib
import subprocess
import sys

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"


def run(*args):
    done = subprocess.run([sys.executable, *args], cwd=EXAMPLES, env=dict(os.environ),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_training_loop_learns():
    lines = [l for l in run("train_loop.py").splitlines() if l.startswith("step")]
    first, last = float(lines[0].split()[-1]), float(lines[-1].split()[-1])
    assert last < 0.8 * first, lines


def test_verify_in_pytest():
    out = run("-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_my_model_is_exact.py")
    assert "1 passed" in out and "vlrnn:num_blocks=7" in out


def test_lstm_block_drop_in():
    out = run("lstm_block.py")
    assert "vlrnn.nn.LSTM" in out and "torch.nn.modules.rnn.LSTM" in out


def test_docs_show_the_training_loop_as_it_is():
    page = (EXAMPLES.parents[1] / "docs" / "python.md").read_text()
    example = (EXAMPLES / "train_loop.py").read_text()
    body = example[example.index("import torch"):]
    assert "```python\n" + body + "```" in page


def test_bidirectional_and_linear_recurrence_example():
    out = run("bidirectional.py")
    lines = [l for l in out.splitlines() if ": method " in l]
    assert [l.split(",")[0] for l in lines] == [
        "bidirectional LSTM: method bivlrnn:num_blocks=10", "minGRU: method vlrnn:num_blocks=10"], out


def test_docs_show_the_bidirectional_example_as_it_is():
    page = (EXAMPLES.parents[1] / "docs" / "python.md").read_text()
    example = (EXAMPLES / "bidirectional.py").read_text()
    body = example[example.index("models = {"):]
    assert "```python\n" + body + "```" in page


def assert_exact_lines(example, marker, methods):
    """The example prints one line per method holding `marker`, ending in its max relative
    difference from the reference: each below 1e-10 (float64)."""
    lines = [l for l in run(example).splitlines() if marker in l]
    assert [l.split(": ")[0] for l in lines] == methods, lines
    for line in lines:
        assert float(line.split()[-1]) < 1e-10, line


def test_chunked_stream_equals_one_call():
    assert_exact_lines("chunked_stream.py", "vs one call",
                       ["vlrnn:block_length=3", "vlrnn:block_length=10", "revolve:slots=2"])


def test_packed_episodes_equal_plain_rnn():
    assert_exact_lines("packed_episodes.py", "vs PlainRNN",
                       ["vlrnn:block_length=20", "checkpoint", "planner:percent=10"])
