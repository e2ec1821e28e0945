"""ctypes binding to libevosdpa.so's C ABI (include/evosdpa/evosdpa.h). Needs neither PyTorch nor a GPU.

ctypes rather than a compiled extension: the package then builds and imports on machines without
PyTorch (CI among them), one wheel serves every Python 3 version, and the C ABI that other languages use
is the one Python tests. The per-call cost (a few microseconds) is off the GPU's critical path: the call
only enqueues work, and CUDA-graph replay skips it entirely.
"""
import ctypes
import os
from ctypes import c_char_p, c_float, c_int, c_int64, c_void_p

SUCCESS, INVALID_ARGUMENT, NOT_SUPPORTED, NO_DEVICE, DEVICE, CUDA = range(6)
DTYPE_FLOAT16, DTYPE_BFLOAT16 = 0, 1
CAUSAL_NONE, CAUSAL_TOP_LEFT, CAUSAL_BOTTOM_RIGHT = 0, 1, 2


class Params(ctypes.Structure):
    """Mirror of evosdpa_params_t."""

    _fields_ = [
        ("q", c_void_p), ("k", c_void_p), ("v", c_void_p), ("o", c_void_p), ("lse", c_void_p),
        ("dtype", c_int),
        ("batch", c_int64), ("heads_q", c_int64), ("heads_kv", c_int64),
        ("seqlen_q", c_int64), ("seqlen_k", c_int64), ("head_dim", c_int64),
        ("q_batch_stride", c_int64), ("q_head_stride", c_int64), ("q_seq_stride", c_int64),
        ("k_batch_stride", c_int64), ("k_head_stride", c_int64), ("k_seq_stride", c_int64),
        ("v_batch_stride", c_int64), ("v_head_stride", c_int64), ("v_seq_stride", c_int64),
        ("o_batch_stride", c_int64), ("o_head_stride", c_int64), ("o_seq_stride", c_int64),
        ("softmax_scale", c_float),
        ("causal", c_int),
    ]


def library_path():
    """EVOSDPA_LIBRARY if set, else the libevosdpa.so installed beside this file."""
    return os.environ.get("EVOSDPA_LIBRARY") or os.path.join(os.path.dirname(__file__), "libevosdpa.so")


def _load():
    path = library_path()
    if not os.path.exists(path):
        raise ImportError(f"evosdpa: shared library not found at {path}; install the package with "
                          "`pip install .` from the repository, or point EVOSDPA_LIBRARY at a built libevosdpa.so")
    lib = ctypes.CDLL(path)  # RTLD_LOCAL: nothing of it leaks into other libraries' symbol lookup
    lib.evosdpa_params_init.argtypes = [ctypes.POINTER(Params)]
    lib.evosdpa_params_init.restype = None
    lib.evosdpa_attention_forward.argtypes = [ctypes.POINTER(Params), c_char_p, c_void_p]
    lib.evosdpa_attention_forward.restype = c_int
    lib.evosdpa_supports.argtypes = [ctypes.POINTER(Params), c_char_p, ctypes.POINTER(c_char_p)]
    lib.evosdpa_supports.restype = c_int
    lib.evosdpa_kernel_count.argtypes = []
    lib.evosdpa_kernel_count.restype = c_int
    lib.evosdpa_kernel_name.argtypes = [c_int]
    lib.evosdpa_kernel_name.restype = c_char_p
    lib.evosdpa_last_error_message.argtypes = []
    lib.evosdpa_last_error_message.restype = c_char_p
    lib.evosdpa_status_string.argtypes = [c_int]
    lib.evosdpa_status_string.restype = c_char_p
    return lib


_lib = _load()


class EvosdpaError(RuntimeError):
    """A failure reported by the library: `status` is the evosdpa_status_t name."""

    def __init__(self, status, message):
        super().__init__(f"{message} [{status}]")
        self.status = status


def new_params():
    p = Params()
    _lib.evosdpa_params_init(ctypes.byref(p))
    return p


def status_name(code):
    return _lib.evosdpa_status_string(code).decode()


def last_error():
    return _lib.evosdpa_last_error_message().decode()


def forward(params, kernel, stream):
    """Launch; returns (status code, message)."""
    code = _lib.evosdpa_attention_forward(ctypes.byref(params), kernel.encode() if kernel else None,
                                          c_void_p(stream))
    return code, (last_error() if code != SUCCESS else "")


def supports(params, kernel=None):
    """(status code, message, name of the kernel that would run or None)."""
    selected = c_char_p()
    code = _lib.evosdpa_supports(ctypes.byref(params), kernel.encode() if kernel else None, ctypes.byref(selected))
    return code, (last_error() if code != SUCCESS else ""), (selected.value.decode() if selected.value else None)


def kernel_names():
    """Kernel names, fastest first; any of them (or "auto") can be passed as `kernel=`."""
    return [_lib.evosdpa_kernel_name(i).decode() for i in range(_lib.evosdpa_kernel_count())]
