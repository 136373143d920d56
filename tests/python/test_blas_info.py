"""vlrnn._C.blas_info(): the BLAS this process calls, OpenBLAS's kernel, and a faster one."""
import json
import os
import subprocess
import sys

import pytest

from vlrnn import _C


def test_names_the_blas_and_its_kernel():
    info = _C.blas_info()
    assert set(info) == {"vendor", "loaded", "core", "faster_core", "warning"}
    if info["faster_core"]:
        assert info["core"], info
        assert f"OPENBLAS_CORETYPE={info['faster_core']}" in info["warning"], info
    if info["vendor"] != "OpenBLAS":
        assert info["faster_core"] == "", info


def _info_under(coretype):
    env = dict(os.environ, OPENBLAS_CORETYPE=coretype)
    code = "import json; from vlrnn import _C; print(json.dumps(_C.blas_info()))"
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_the_kernel_set_before_start_is_the_one_run_and_reported():
    if _C.blas_info()["vendor"] != "OpenBLAS":
        pytest.skip("LibTorch here does not call OpenBLAS")
    # Prescott, OpenBLAS's generic x86-64 kernel, runs on any x86-64 processor; a faster
    # kernel is suggested exactly when this processor has AVX2 and FMA.
    if os.uname().machine != "x86_64":
        pytest.skip("OpenBLAS's Prescott kernel is x86-64's")
    info = _info_under("Prescott")
    assert info["core"] == "Prescott", info
    with open("/proc/cpuinfo") as cpuinfo:
        flags = next(line for line in cpuinfo if line.startswith("flags")).split()
    has_avx2 = "avx2" in flags and "fma" in flags
    assert (info["faster_core"] != "") == has_avx2, (info, has_avx2)
