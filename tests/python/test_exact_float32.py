"""float32 as float32 where exactness is checked (NOTE [ Float32 without TF32 ] in
vlrnn/core/exact_float32.h): TF32 off for cuDNN and cuBLAS inside, as before after."""
import torch

from vlrnn import _C


def flags():
    return torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32


def test_tf32_is_off_inside_and_as_before_after():
    before = flags()
    torch.backends.cudnn.allow_tf32 = True  # torch's default for cuDNN
    try:
        with _C.ExactFloat32():
            inside = flags()
        # Without a GPU the settings are moot and stay as they are.
        assert inside == ((False, False) if torch.cuda.is_available() else (True, before[1]))
        assert flags() == (True, before[1])
    finally:
        torch.backends.cudnn.allow_tf32 = before[0]
