"""A TorchScript model file of `vlrnn verify --model-file` as an RNNModule.

The file holds the signature of NOTE [ The TorchScript model signature ]
(vlrnn/include/vlrnn/core/script_model.h; scripts/export_cell.py makes one):

    self.input_size: int
    initial_state(batch) -> Tuple[Tensor, ...]   each tensor holds the batch in one dim
    forward(x [T, B, F], state, lengths [B]) -> (z [T, B, H], state)

vlrnn.ModelFile(path) loads it with torch.jit.load (its parameters are this module's, for an
optimizer and state_dict) and calls it as an RNNModule: forward(x, h) with x batch-first
[B, T, F] or a PackedSequence, h None (the file's initial_state) or the state with every
tensor's batch moved to dim 1 ([., B, ...], as VLRNN carries states). So the same file
that `vlrnn verify --model-file` checks trains in a Python loop with vlrnn.VLRNN.
Shapes: T = steps, B = batch, F = input features, H = output features.
"""
import os

import torch
from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence

from ._sequences import pack_like
from .modules import RNNModule


def _first_line(error):
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


class ModelFile(RNNModule):
    def __init__(self, path):
        super().__init__()
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path: expected a file name, got {type(path).__name__}")
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise ValueError(f"path: expected a TorchScript file (torch.jit.script(m).save(path)), "
                             f"found no file {path!r}")
        try:
            script = torch.jit.load(path)
        except Exception as error:  # what torch raises differs between versions
            raise ValueError(f"path: {path} is not a TorchScript module file "
                             f"({_first_line(error)})") from None
        for needed in ("input_size", "initial_state"):
            if not hasattr(script, needed):
                raise ValueError(f"{path}: expected the model file signature "
                                 f"(self.input_size, initial_state(batch), forward(x, state, "
                                 f"lengths)), found no {needed}")
        self.path, self.script = path, script
        self.input_size = int(script.input_size)
        one, two = script.initial_state(1), script.initial_state(2)
        self._batch_dims = []
        for i, (a, b) in enumerate(zip(one, two)):
            dims = [d for d in range(a.dim()) if a.shape[d] == 1 and b.shape[d] == 2]
            if len(dims) != 1 or a.dim() != b.dim():
                raise ValueError(f"{path}: initial_state(batch)[{i}] must hold the batch in "
                                 f"one dimension; got shapes {list(a.shape)} for 1 sequence "
                                 f"and {list(b.shape)} for 2")
            self._batch_dims.append(dims[0])

    def extra_repr(self):
        return repr(self.path)

    def _to_file(self, h, batch):
        if h is None:
            return tuple(self.script.initial_state(batch))
        tensors = (h,) if isinstance(h, torch.Tensor) else tuple(h)
        return tuple(t.movedim(1, d) for t, d in zip(tensors, self._batch_dims))

    def engine_block(self):
        """The engine's block function (x [T, B, F], state with the batch at dim 1, lengths
        or None): the file's forward on every sequence, as `vlrnn verify --model-file`
        calls it (NOTE [ Python modules in the engine ])."""
        def block(x, state, lengths):
            if lengths is None:
                lengths = torch.full((x.shape[1],), x.shape[0], dtype=torch.int64)
            z, state = self.script(x, self._to_file(state, x.shape[1]), lengths.to(x.device))
            return z, tuple(t.movedim(d, 1) for t, d in zip(state, self._batch_dims))
        return block

    def forward(self, x, h=None):
        if isinstance(x, PackedSequence):
            x_tm, lengths = pad_packed_sequence(x)  # [T, B, F], the caller's order
        else:
            x_tm = x.transpose(0, 1)
            lengths = torch.full((x.shape[0],), x.shape[1], dtype=torch.int64)
        z, state = self.script(x_tm, self._to_file(h, x_tm.shape[1]),
                               lengths.to(x_tm.device))
        state = tuple(t.movedim(d, 1) for t, d in zip(state, self._batch_dims))
        if isinstance(x, PackedSequence):
            return pack_like(z, x), state
        return z.transpose(0, 1), state
