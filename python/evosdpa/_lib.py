"""ctypes binding to libevosdpa.so's C ABI (include/evosdpa/evosdpa.h). Needs neither PyTorch nor a GPU.

ctypes rather than a compiled extension: the package then builds and imports on machines without
PyTorch (CI among them), one wheel serves every Python 3 version, and the C ABI that other languages use
is the one Python tests. The per-call cost (a few microseconds) is off the GPU's critical path: the call
only enqueues work, and CUDA-graph replay skips it entirely.

The Params mirror follows the header's ABI rule: it starts with struct_size, is initialised by
evosdpa_params_init_sized() with the mirror's own size, and the library then knows which fields this
binding has. At import the mirror is checked against the library (see _check_mirror).

The backward pass (C ABI 0.4) and the forward's workspace query (0.5, for the KV cache's split-KV
partials) are bound where the library has them: an older library still imports and runs the dense forward
(it accepts this larger mirror while the fields it lacks stay zero), and the functions below that need a
newer one raise RuntimeError naming the library and the C ABI version that added what is missing. The
variable-length batches of 0.6 are Params fields only, with no function to look for: require_fields()
checks the library's version instead, so that a call fails with that RuntimeError rather than with the
library's refusal of a newer header's non-zero bytes (NOT_SUPPORTED, naming struct sizes).
"""
import ctypes
import math
import os
import re
from ctypes import c_char_p, c_double, c_float, c_int, c_int32, c_int64, c_size_t, c_void_p

SUCCESS, INVALID_ARGUMENT, NOT_SUPPORTED, NO_DEVICE, DEVICE, CUDA = range(6)
DTYPE_FLOAT16, DTYPE_BFLOAT16, DTYPE_FLOAT8_E4M3 = 0, 1, 2
CAUSAL_NONE, CAUSAL_TOP_LEFT, CAUSAL_BOTTOM_RIGHT = 0, 1, 2
BACKWARD_DETERMINISTIC, BACKWARD_FAST = 0, 1
MASK_NONE, MASK_BOOL, MASK_ADDITIVE = 0, 1, 2

# The evosdpa.h whose evosdpa_params_t the Params mirror below copies.
HEADER_VERSION = "0.9.0"


class Params(ctypes.Structure):
    """Mirror of evosdpa_params_t (evosdpa.h HEADER_VERSION). Fields are only ever appended."""

    _fields_ = [
        ("struct_size", c_size_t),
        ("q", c_void_p), ("k", c_void_p), ("v", c_void_p), ("o", c_void_p), ("lse", c_void_p),
        ("dtype", c_int),
        ("batch", c_int64), ("heads_q", c_int64), ("heads_kv", c_int64),
        ("seqlen_q", c_int64), ("seqlen_k", c_int64), ("head_dim", c_int64),
        ("q_batch_stride", c_int64), ("q_head_stride", c_int64), ("q_seq_stride", c_int64),
        ("k_batch_stride", c_int64), ("k_head_stride", c_int64), ("k_seq_stride", c_int64),
        ("v_batch_stride", c_int64), ("v_head_stride", c_int64), ("v_seq_stride", c_int64),
        ("o_batch_stride", c_int64), ("o_head_stride", c_int64), ("o_seq_stride", c_int64),
        ("softmax_scale", c_float),  # NaN (the init default): 1/sqrt(head_dim)
        ("causal", c_int),
        # 0.3: FP8 inputs (E4M3 values times float32 descales read from device memory)
        ("o_dtype", c_int),
        ("q_descale", c_void_p), ("k_descale", c_void_p), ("v_descale", c_void_p),
        ("descale_batch_stride", c_int64), ("descale_head_stride", c_int64),
        # 0.4: the backward pass (dO in; dQ, dK, dV out; a device workspace; how dQ is summed)
        ("dout", c_void_p), ("dq", c_void_p), ("dk", c_void_p), ("dv", c_void_p),
        ("dout_batch_stride", c_int64), ("dout_head_stride", c_int64), ("dout_seq_stride", c_int64),
        ("dq_batch_stride", c_int64), ("dq_head_stride", c_int64), ("dq_seq_stride", c_int64),
        ("dk_batch_stride", c_int64), ("dk_head_stride", c_int64), ("dk_seq_stride", c_int64),
        ("dv_batch_stride", c_int64), ("dv_head_stride", c_int64), ("dv_seq_stride", c_int64),
        ("workspace", c_void_p), ("workspace_size", c_size_t),
        ("backward_mode", c_int),  # BACKWARD_DETERMINISTIC (0, the default) or BACKWARD_FAST
        # 0.5: a KV cache (evosdpa.h "Serving"): per-sequence key counts, a page table, forward key splits
        ("seqused_k", c_void_p),   # NULL or device int32 [batch]
        ("page_table", c_void_p),  # NULL (K, V dense) or device int32 [batch, >= ceil(seqlen_k / page_size)]
        ("page_table_batch_stride", c_int64),  # in int32s
        ("page_size", c_int64),    # keys per page (a multiple of 16) with a page table, else 0
        ("num_pages", c_int64),    # pages K and V point to, with a page table, else 0
        ("num_splits", c_int64),   # 0 the library's choice, 1 none, N > 1 exactly N
        # 0.6: variable-length batches (evosdpa.h "Variable-length batches"): sequences packed without padding
        ("cu_seqlens_q", c_void_p),  # NULL or device int32 [batch + 1]: sequence b is rows cu[b] .. cu[b+1]-1 of q, o
        ("cu_seqlens_k", c_void_p),  # NULL or device int32 [batch + 1]: the same for k, v
        ("total_q", c_int64),        # rows of the packed q and o with cu_seqlens_q, else 0
        ("total_k", c_int64),        # rows of the packed k and v with cu_seqlens_k, else 0
        # 0.7: a sliding window and a logit softcap (evosdpa.h "Sliding window and softcap")
        ("window_left", c_int64),    # with sliding_window: keys before the diagonal a query sees, or -1 for all
        ("window_right", c_int64),   # with sliding_window: keys after the diagonal, or -1 for all
        ("sliding_window", c_int32),  # 0 none (both bounds 0), 1 the bounds apply
        ("softcap", c_float),  # 0 none; c > 0: scores become c * tanh(s / c)
        # 0.8: a mask tensor (evosdpa.h "Mask tensors"), PyTorch SDPA's attn_mask
        ("mask", c_void_p),  # NULL or device [batch|1, heads_q|1, seqlen_q|1, seqlen_k], keys contiguous
        ("mask_batch_stride", c_int64), ("mask_head_stride", c_int64), ("mask_seq_stride", c_int64),  # elements, 0 broadcasts
        ("mask_type", c_int32),  # MASK_NONE (mask NULL), MASK_BOOL (bytes, nonzero: seen) or MASK_ADDITIVE (the dtype)
        # 0.9: ALiBi (evosdpa.h "ALiBi"), FlashAttention's alibi_slopes
        ("alibi_slopes", c_void_p),  # NULL or device float32 [batch|1, heads_q], the heads contiguous
        ("alibi_batch_stride", c_int64),  # elements between batch entries' slopes; 0: one set for every entry
    ]


def library_path():
    """EVOSDPA_LIBRARY if set, else the libevosdpa.so installed beside this file."""
    return os.environ.get("EVOSDPA_LIBRARY") or os.path.join(os.path.dirname(__file__), "libevosdpa.so")


_SIGNATURES = {
    # name: (argtypes, restype)
    "evosdpa_params_init_sized": ([ctypes.POINTER(Params), c_size_t], c_int),
    "evosdpa_attention_forward": ([ctypes.POINTER(Params), c_char_p, c_void_p], c_int),
    "evosdpa_supports": ([ctypes.POINTER(Params), c_char_p, ctypes.POINTER(c_char_p)], c_int),
    "evosdpa_kernel_count": ([], c_int),
    "evosdpa_kernel_name": ([c_int], c_char_p),
    "evosdpa_last_error_message": ([], c_char_p),
    "evosdpa_status_string": ([c_int], c_char_p),
    "evosdpa_version": ([], c_char_p),
    "evosdpa_dtype_size": ([c_int], c_size_t),
    "evosdpa_output_tolerance": ([c_int, c_double, c_double], c_double),
    "evosdpa_lse_tolerance": ([c_double], c_double),
    "evosdpa_lse_tolerance_for": ([c_int, c_double], c_double),
}

# Since 0.4, bound when present: a library without them still imports (see the module docstring).
_BACKWARD_SIGNATURES = {
    "evosdpa_attention_backward": ([ctypes.POINTER(Params), c_char_p, c_void_p], c_int),
    "evosdpa_backward_workspace_size": ([ctypes.POINTER(Params), c_char_p, ctypes.POINTER(c_size_t)], c_int),
    "evosdpa_supports_backward": ([ctypes.POINTER(Params), c_char_p, ctypes.POINTER(c_char_p)], c_int),
}

# Since 0.5, bound when present, likewise: the forward's workspace (split-KV partials of a KV cache).
_SERVING_SIGNATURES = {
    "evosdpa_forward_workspace_size": ([ctypes.POINTER(Params), c_char_p, ctypes.POINTER(c_size_t)], c_int),
}

# What each optional function belongs to and the C ABI version that added it, for the RuntimeError a call
# raises when the library lacks it.
_OPTIONAL_SINCE = {**{name: ("no backward pass", "0.4.0") for name in _BACKWARD_SIGNATURES},
                   **{name: ("no KV-cache forward", "0.5.0") for name in _SERVING_SIGNATURES}}

# Since 0.6, features that are Params fields only: what each is, its fields and the C ABI version that added
# them, for the RuntimeError require_fields() raises when the library is older.
_FIELDS_SINCE = {"varlen": ("no variable-length batches", "cu_seqlens_q, cu_seqlens_k, total_q, total_k", "0.6.0"),
                 "score_mods": ("no sliding window or softcap", "window_left, window_right, sliding_window, softcap",
                                "0.7.0"),
                 "mask": ("no mask tensors", "mask, mask_batch_stride, mask_head_stride, mask_seq_stride, mask_type",
                          "0.8.0"),
                 "alibi": ("no ALiBi", "alibi_slopes, alibi_batch_stride", "0.9.0")}


def _load():
    path = library_path()
    if not os.path.exists(path):
        raise ImportError(f"evosdpa: shared library not found at {path}; install the package with "
                          "`pip install .` from the repository, or point EVOSDPA_LIBRARY at a built libevosdpa.so")
    return _bind(ctypes.CDLL(path), path)  # RTLD_LOCAL: nothing of it leaks into other libraries' symbols


def _bind(lib, path):
    """Set the signatures and check the Params mirror; ImportError naming what does not match."""
    missing = [name for name in _SIGNATURES if not hasattr(lib, name)]
    if missing:
        version = "no evosdpa_version(): older than 0.2.0"
        if hasattr(lib, "evosdpa_version"):
            lib.evosdpa_version.argtypes, lib.evosdpa_version.restype = _SIGNATURES["evosdpa_version"]
            version = f"version {lib.evosdpa_version().decode()}"
        raise ImportError(f"evosdpa: the library at {path} ({version}) lacks {', '.join(missing)}: it predates "
                          f"the C ABI of evosdpa.h {HEADER_VERSION} that this Python package was written for; "
                          "rebuild and reinstall the package (`pip install .`) or point EVOSDPA_LIBRARY at a "
                          "matching build")
    for name, (argtypes, restype) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, restype
    for name, (argtypes, restype) in {**_BACKWARD_SIGNATURES, **_SERVING_SIGNATURES}.items():
        if hasattr(lib, name):
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = argtypes, restype
    _check_mirror(lib, path)
    return lib


def _check_mirror(lib, path):
    """ImportError unless the library initialises a Params of this mirror's size as the header says.

    A library older than the mirror's header has a larger minimum size and refuses it; one whose struct
    differs in the fields both know leaves struct_size, dtype, the NaN scale or causal elsewhere.
    """
    size = ctypes.sizeof(Params)
    p = Params()
    for f, kind in Params._fields_:  # poison, so a field the library did not write is seen
        if f == "softmax_scale":
            p.softmax_scale = 1.0
        elif kind is not c_void_p:
            setattr(p, f, -1)
    code = lib.evosdpa_params_init_sized(ctypes.byref(p), size)
    version = lib.evosdpa_version().decode()
    what = (f"evosdpa: the Params mirror in {__file__} copies evosdpa_params_t of evosdpa.h {HEADER_VERSION} "
            f"({size} bytes), but the library at {path} (version {version})")
    if code != SUCCESS:
        message = lib.evosdpa_last_error_message().decode()
        raise ImportError(f"{what} refuses it: {message}; rebuild and reinstall the package (`pip install .`) "
                          "so the library and the binding come from one source tree")
    if (p.struct_size != size or p.dtype != DTYPE_FLOAT16 or p.causal != CAUSAL_NONE
            or not math.isnan(p.softmax_scale) or p.batch != 0 or p.o_seq_stride != 0
            or p.backward_mode != BACKWARD_DETERMINISTIC or p.num_splits != 0 or p.total_k != 0 or p.window_left != 0 or p.softcap != 0
            or p.mask_type != MASK_NONE or p.mask_seq_stride != 0 or p.alibi_batch_stride != 0):
        raise ImportError(f"{what} initialises it differently (struct_size {p.struct_size}, dtype {p.dtype}, "
                          f"softmax_scale {p.softmax_scale}, causal {p.causal}): the struct layouts differ; "
                          "rebuild and reinstall the package (`pip install .`) from one source tree")


_lib = _load()


class EvosdpaError(RuntimeError):
    """A failure reported by the library: `status` is the evosdpa_status_t name."""

    def __init__(self, status, message):
        super().__init__(f"{message} [{status}]")
        self.status = status


def new_params():
    """A Params initialised by the library: struct_size = sizeof(Params), fp16, no mask, scale NaN."""
    p = Params()
    code = _lib.evosdpa_params_init_sized(ctypes.byref(p), ctypes.sizeof(Params))
    if code != SUCCESS:  # checked at import; only a library swapped underneath us gets here
        raise EvosdpaError(status_name(code), last_error())
    return p


def status_name(code):
    return _lib.evosdpa_status_string(code).decode()


def last_error():
    return _lib.evosdpa_last_error_message().decode()


def version():
    """The library's version, "MAJOR.MINOR.PATCH" (evosdpa_version())."""
    return _lib.evosdpa_version().decode()


def dtype_size(dtype):
    """Bytes per element of a DTYPE_* code; 0 for a value that is not one."""
    return _lib.evosdpa_dtype_size(dtype)


def output_tolerance(dtype, baseline_error, max_abs_reference):
    """The accuracy contract (evosdpa_output_tolerance): how far O may be from float64 attention.

    dtype: a DTYPE_* code; baseline_error: max |O_baseline - O_f64| of the plain fused computation in that
    dtype; max_abs_reference: max |O_f64|.
    """
    return _lib.evosdpa_output_tolerance(dtype, float(baseline_error), float(max_abs_reference))


def lse_tolerance(max_abs_lse, dtype=DTYPE_FLOAT16):
    """How far the log-sum-exp may be from float64 (evosdpa_lse_tolerance_for), given max |lse_f64| and
    the inputs' dtype code."""
    return _lib.evosdpa_lse_tolerance_for(dtype, float(max_abs_lse))


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


def _too_old(what, missing, since):
    return RuntimeError(f"evosdpa: the library at {library_path()} (version {version()}) has {what} "
                        f"({missing}; C ABI {since} added it); rebuild and reinstall the package (`pip install .`) "
                        f"or point EVOSDPA_LIBRARY at a build of evosdpa {since} or newer")


def _optional_entry(name):
    """The library's function `name` (one of _OPTIONAL_SINCE); RuntimeError when the library predates it."""
    if not hasattr(_lib, name):
        what, since = _OPTIONAL_SINCE[name]
        raise _too_old(what, f"{name} is missing", since)
    return getattr(_lib, name)


def _version_tuple(text):
    """(major, minor, patch) of "MAJOR.MINOR.PATCH[anything]"; (0, 0, 0) for a string of another form."""
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(x) for x in m.groups()) if m else (0, 0, 0)


def require_fields(feature):
    """RuntimeError unless the library knows the Params fields of `feature` (a key of _FIELDS_SINCE).

    An older library accepts this larger mirror while those fields are zero and refuses a call that sets
    them (NOT_SUPPORTED: "a newer evosdpa header"), a message about struct sizes; this names the feature."""
    what, fields, since = _FIELDS_SINCE[feature]
    if _version_tuple(version()) < _version_tuple(since):
        raise _too_old(what, f"evosdpa_params_t lacks {fields}", since)


def backward_workspace_size(params, kernel):
    """(status code, message, bytes of device workspace backward() needs for these params and kernel)."""
    size = c_size_t(0)
    fn = _optional_entry("evosdpa_backward_workspace_size")
    code = fn(ctypes.byref(params), kernel.encode() if kernel else None, ctypes.byref(size))
    return code, (last_error() if code != SUCCESS else ""), size.value


def backward(params, kernel, stream):
    """Launch the backward pass (dq, dk, dv from q, k, v, o, lse and dout); returns (status code, message)."""
    fn = _optional_entry("evosdpa_attention_backward")
    code = fn(ctypes.byref(params), kernel.encode() if kernel else None, c_void_p(stream))
    return code, (last_error() if code != SUCCESS else "")


def supports_backward(params, kernel=None):
    """(status code, message, name of the kernel whose backward would run or None)."""
    selected = c_char_p()
    fn = _optional_entry("evosdpa_supports_backward")
    code = fn(ctypes.byref(params), kernel.encode() if kernel else None, ctypes.byref(selected))
    return code, (last_error() if code != SUCCESS else ""), (selected.value.decode() if selected.value else None)


def forward_workspace_size(params, kernel):
    """(status code, message, bytes of device workspace forward() would use for these params and kernel):
    0 unless the kernel splits keys through it (split-KV over a KV cache; C ABI 0.5) or claims work from a
    counter in it (wgmma_sm90 on sequences of their own lengths)."""
    size = c_size_t(0)
    fn = _optional_entry("evosdpa_forward_workspace_size")
    code = fn(ctypes.byref(params), kernel.encode() if kernel else None, ctypes.byref(size))
    return code, (last_error() if code != SUCCESS else ""), size.value
