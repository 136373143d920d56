#!/usr/bin/env bash
# The Python package's documented install: `cmake --install BUILD --component python
# --prefix P` puts `vlrnn` under P/lib/python3.X/{dist,site}-packages; imported from there
# (not from the build), it runs VLRNN on nn.GRU and matches full BPTT.
# Usage: test_python_install.sh BUILD_DIR PYTHON
set -euo pipefail
build=$(cd "$1" && pwd)
python=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --component python --prefix "$prefix" >/dev/null
site=$(cd "$prefix" && ls -d lib/python3*/*-packages)
cd "$prefix"  # nothing of the source tree or the build on sys.path
PYTHONPATH="$prefix/$site" "$python" - "$prefix" <<'PY'
import sys
import torch
from torch import nn
import vlrnn

assert vlrnn.__file__.startswith(sys.argv[1]), vlrnn.__file__
class GRU(nn.GRU, vlrnn.RNNModule):
    pass
class Head(vlrnn.OutputModule):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 3)
    def forward(self, z, y):
        return nn.functional.cross_entropy(self.linear(z).transpose(1, 2), y, reduction="none")
torch.manual_seed(0)
rnn, out = GRU(4, 6, batch_first=True).double(), Head().double()
x, y = torch.randn(3, 40, 4, dtype=torch.float64), torch.randint(0, 3, (3, 40))
vlrnn.assert_exact(rnn, out, x, y, methods=["vlrnn:num_blocks=5"])
print(f"vlrnn imported from {vlrnn.__file__}: exact")
PY
