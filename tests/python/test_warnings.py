"""The library's C++ warnings reach Python as Python warnings (NOTE [ C++ warnings in Python ]
in python/src/python_warnings.h), not as lines on stderr."""
import json
import subprocess
import sys

# A fresh process: oneDNN's LSTM is probed once per process, at the first model or method, so
# only a process that has made none can see its one warning.
FIRST_PROBE = r"""
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import vlrnn
    from vlrnn import _C
    agrees = _C.onednn_lstm_inference_agrees()
print(json.dumps({"agrees": agrees,
                  "warnings": [[type(w.message).__name__, str(w.message)] for w in caught]}))
"""


def test_onednns_warning_is_a_python_warning_exactly_where_the_probe_disagrees():
    done = subprocess.run([sys.executable, "-c", FIRST_PROBE], capture_output=True, text=True,
                          timeout=300, check=True)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    onednn = [w for w in seen["warnings"] if "oneDNN" in w[1]]
    # Where oneDNN's LSTM is right (most processors, PyTorch < 2.1) nothing is said; where
    # it is not, one UserWarning, and nothing about it on stderr.
    assert len(onednn) == (0 if seen["agrees"] else 1), seen
    assert all(category == "UserWarning" for category, _ in onednn), seen
    assert "oneDNN" not in done.stderr, done.stderr
