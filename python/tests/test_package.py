"""What works without PyTorch and without a GPU: import, the C ABI's names and errors."""
import ctypes
import os
import subprocess
import sys

import pytest

import evosdpa
from evosdpa import _lib


def test_import_and_kernel_names():
    assert evosdpa.kernel_names() == ["mma_sm80", "reference"]
    assert os.path.exists(evosdpa.library_path())
    assert evosdpa.__version__ == "0.1.0"


def test_params_struct_matches_the_c_abi():
    # 5 pointers, the dtype enum (padded to 8), 6 sizes, 12 strides, the scale and the causal enum.
    assert ctypes.sizeof(_lib.Params) == 5 * 8 + 8 + 6 * 8 + 12 * 8 + 4 + 4
    p = _lib.new_params()
    assert p.q is None and p.dtype == _lib.DTYPE_FLOAT16 and p.causal == _lib.CAUSAL_NONE and p.softmax_scale == 0.0


def test_argument_errors_from_the_c_abi():
    p = _lib.new_params()
    p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k, p.head_dim = 1, 1, 1, 8, 8, 80
    code, message, selected = _lib.supports(p)
    assert _lib.status_name(code) == "EVOSDPA_ERROR_NOT_SUPPORTED"
    assert "head_dim 80" in message and selected is None
    p.head_dim = 64
    code, message = _lib.forward(p, "auto", 0)
    assert code == _lib.INVALID_ARGUMENT and "q is a null pointer" in message
    code, message = _lib.forward(p, "warp-speed", 0)
    assert code == _lib.INVALID_ARGUMENT and 'unknown kernel "warp-speed"' in message


def test_import_does_not_import_torch():
    code = "import sys, evosdpa; evosdpa.kernel_names(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_unknown_attribute():
    with pytest.raises(AttributeError):
        evosdpa.no_such_function
