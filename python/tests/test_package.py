"""What works without PyTorch and without a GPU: import, the C ABI's names and errors."""
import ctypes
import math
import os
import re
import subprocess
import sys

import pytest

import evosdpa
from evosdpa import _lib


def test_import_and_kernel_names():
    assert evosdpa.kernel_names() == ["splitkv_sm80", "wgmma_sm90", "mma_sm80", "mma_fp8_sm89", "reference"]
    assert os.path.exists(evosdpa.library_path())
    assert evosdpa.__version__ == "0.9.0"


def test_params_struct_matches_the_c_abi():
    # struct_size, 5 pointers, the dtype enum (padded to 8), 6 sizes, 12 strides, the scale and the causal
    # enum; since 0.3 the output dtype (padded to 8), 3 descale pointers and 2 descale strides; since 0.4
    # 4 gradient pointers, 12 gradient strides, the workspace pointer and size, the backward mode (padded);
    # since 0.5 the seqused_k and page table pointers, the page table stride, page size, page count, splits;
    # since 0.6 the two cu_seqlens pointers and the two totals; since 0.7 the two window bounds, the window
    # flag and the softcap; since 0.8 the mask pointer, its three strides and its type (padded to 8); since
    # 0.9 the ALiBi slopes' pointer and their batch stride.
    assert _lib.Params._fields_[0] == ("struct_size", ctypes.c_size_t)
    assert ctypes.sizeof(_lib.Params) == (8 + 5 * 8 + 8 + 6 * 8 + 12 * 8 + 4 + 4 + 8 + 3 * 8 + 2 * 8
                                          + 4 * 8 + 12 * 8 + 8 + 8 + 8
                                          + 2 * 8 + 4 * 8
                                          + 2 * 8 + 2 * 8
                                          + 2 * 8 + 4 + 4
                                          + 8 + 3 * 8 + 8
                                          + 8 + 8)
    assert [f for f, _ in _lib.Params._fields_[-21:]] == ["seqused_k", "page_table", "page_table_batch_stride",
                                                          "page_size", "num_pages", "num_splits", "cu_seqlens_q",
                                                          "cu_seqlens_k", "total_q", "total_k", "window_left",
                                                          "window_right", "sliding_window", "softcap", "mask",
                                                          "mask_batch_stride", "mask_head_stride",
                                                          "mask_seq_stride", "mask_type", "alibi_slopes",
                                                          "alibi_batch_stride"]
    p = _lib.new_params()
    assert p.struct_size == ctypes.sizeof(_lib.Params)
    assert p.q is None and p.lse is None and p.batch == 0 and p.head_dim == 0 and p.o_seq_stride == 0
    assert p.dtype == _lib.DTYPE_FLOAT16 and p.causal == _lib.CAUSAL_NONE
    assert math.isnan(p.softmax_scale)  # NaN: 1/sqrt(head_dim)
    assert p.o_dtype == _lib.DTYPE_FLOAT16 and p.q_descale is None and p.v_descale is None
    assert p.descale_batch_stride == 0 and p.descale_head_stride == 0
    assert p.dout is None and p.dv is None and p.workspace is None and p.workspace_size == 0
    assert p.dq_seq_stride == 0 and p.backward_mode == _lib.BACKWARD_DETERMINISTIC
    assert p.seqused_k is None and p.page_table is None and p.page_table_batch_stride == 0
    assert p.page_size == 0 and p.num_pages == 0 and p.num_splits == 0
    assert p.cu_seqlens_q is None and p.cu_seqlens_k is None and p.total_q == 0 and p.total_k == 0
    assert p.window_left == 0 and p.window_right == 0 and p.sliding_window == 0 and p.softcap == 0.0
    assert p.mask is None and p.mask_type == _lib.MASK_NONE and p.mask_batch_stride == p.mask_seq_stride == 0
    assert p.alibi_slopes is None and p.alibi_batch_stride == 0


def test_version_and_dtype_sizes():
    assert _lib.version() == evosdpa.library_version() == _lib.HEADER_VERSION == "0.9.0"
    assert _lib.dtype_size(_lib.DTYPE_FLOAT16) == 2 and _lib.dtype_size(_lib.DTYPE_BFLOAT16) == 2
    assert _lib.dtype_size(_lib.DTYPE_FLOAT8_E4M3) == 1
    assert _lib.dtype_size(7) == 0


@pytest.mark.parametrize("dtype", [_lib.DTYPE_FLOAT16, _lib.DTYPE_BFLOAT16])
def test_output_tolerance_is_positive_and_monotone(dtype):
    tol = _lib.output_tolerance
    assert tol(dtype, 0.0, 0.0) == 0.0  # all-zero output (no key anywhere): must be exact
    for base in (0.0, 1e-4, 1e-3):
        for mag in (0.5, 1.0, 4.0):
            t = tol(dtype, base, mag)
            assert t > 0 and math.isfinite(t)
            assert tol(dtype, base * 2 + 1e-5, mag) >= t  # a worse baseline never tightens it
            assert tol(dtype, base, mag * 2) >= t         # nor does a larger output
    assert tol(dtype, 1e-3, 1.0) >= 1e-3  # at least the baseline's own error
    assert tol(dtype, 1e9, 1.0) < 1.0     # capped at a few roundings of max |O|
    assert tol(_lib.DTYPE_BFLOAT16, 1e-3, 1.0) >= tol(_lib.DTYPE_FLOAT16, 1e-3, 1.0)  # coarser dtype, looser


def test_lse_tolerance_is_positive_and_monotone():
    assert _lib.lse_tolerance(0.0) > 0
    values = [_lib.lse_tolerance(m) for m in (0.0, 0.5, 1.0, 10.0, 1e3)]
    assert values == sorted(values) and all(math.isfinite(v) for v in values)


def test_new_fields_are_refused_when_the_library_lacks_them():
    # A caller newer than the library (struct_size larger) is accepted only while its extra bytes are zero.
    class Newer(ctypes.Structure):
        _fields_ = [("base", _lib.Params), ("future_field", ctypes.c_int64)]

    n = Newer()
    assert _lib._lib.evosdpa_params_init_sized(ctypes.byref(n.base), ctypes.sizeof(Newer)) == _lib.SUCCESS
    assert n.base.struct_size == ctypes.sizeof(Newer) and n.future_field == 0
    n.base.batch, n.base.heads_q, n.base.heads_kv, n.base.seqlen_q, n.base.seqlen_k, n.base.head_dim = 1, 1, 1, 8, 8, 64
    code, message = _lib.forward(n.base, "auto", 0)
    assert code == _lib.INVALID_ARGUMENT and "q is a null pointer" in message  # got past the size check
    n.future_field = 1
    code, message = _lib.forward(n.base, "auto", 0)
    assert code == _lib.NOT_SUPPORTED and "newer evosdpa header" in message
    too_small = _lib.new_params()
    assert _lib._lib.evosdpa_params_init_sized(ctypes.byref(too_small), 8) == _lib.INVALID_ARGUMENT
    assert too_small.struct_size == ctypes.sizeof(_lib.Params)  # nothing written


class _FakeLibrary:
    """Stands in for a CDLL: every symbol of the current ABI, with init_sized and version overridable."""

    def __init__(self, init_sized, version=b"9.9.9", drop=()):
        def fn(result):
            def call(*args):
                return result
            return call

        for name in _lib._SIGNATURES:
            if name not in drop:
                setattr(self, name, fn(0))
        self.evosdpa_version = fn(version)
        self.evosdpa_last_error_message = fn(b"struct_size 208 is below the smallest evosdpa_params_t (216 bytes)")
        if "evosdpa_params_init_sized" not in drop:
            self.evosdpa_params_init_sized = init_sized


def test_a_mismatched_library_is_an_import_error():
    def refuses(params, size):
        return _lib.INVALID_ARGUMENT

    with pytest.raises(ImportError, match=r"version 9\.9\.9\) refuses it: struct_size 208 is below"):
        _lib._bind(_FakeLibrary(refuses), "/old/libevosdpa.so")

    def other_layout(params, size):  # writes nothing where the mirror expects struct_size and the scale
        return _lib.SUCCESS

    with pytest.raises(ImportError, match="initialises it differently.*struct layouts differ"):
        _lib._bind(_FakeLibrary(other_layout), "/other/libevosdpa.so")

    with pytest.raises(ImportError, match=r"\(version 9\.9\.9\) lacks evosdpa_params_init_sized.*predates the C ABI "
                                          "of evosdpa.h 0.9.0"):
        _lib._bind(_FakeLibrary(None, drop=("evosdpa_params_init_sized",)), "/v010/libevosdpa.so")


def test_a_library_without_the_backward_pass_imports(monkeypatch):
    # A 0.3 library (no backward entry points) binds and runs the forward; the backward functions say why not.
    def initialises(params, size):  # as evosdpa_params_init_sized does
        p = params._obj
        ctypes.memset(ctypes.addressof(p), 0, size)
        p.struct_size, p.softmax_scale = size, math.nan
        return _lib.SUCCESS

    old = _FakeLibrary(initialises, version=b"0.3.0")
    assert _lib._bind(old, "/v030/libevosdpa.so") is old
    monkeypatch.setattr(_lib, "_lib", old)
    p = _lib.new_params()
    for call in (lambda: _lib.backward(p, "auto", 0), lambda: _lib.backward_workspace_size(p, None),
                 lambda: _lib.supports_backward(p)):
        with pytest.raises(RuntimeError, match=r"\(version 0\.3\.0\) has no backward pass \(evosdpa_\w+ is "
                                               r"missing; C ABI 0\.4\.0 added it\); rebuild"):
            call()


def test_a_library_without_the_kv_cache_imports(monkeypatch):
    # A 0.4 library (backward pass, no forward workspace): binds and runs the forward; the KV cache's
    # workspace query says why not.
    def initialises(params, size):
        p = params._obj
        ctypes.memset(ctypes.addressof(p), 0, size)
        p.struct_size, p.softmax_scale = size, math.nan
        return _lib.SUCCESS

    old = _FakeLibrary(initialises, version=b"0.4.0")
    for name in _lib._BACKWARD_SIGNATURES:
        setattr(old, name, lambda *args: _lib.SUCCESS)
    assert _lib._bind(old, "/v040/libevosdpa.so") is old
    monkeypatch.setattr(_lib, "_lib", old)
    p = _lib.new_params()
    assert _lib.backward(p, "auto", 0) == (_lib.SUCCESS, "")
    with pytest.raises(RuntimeError, match=r"\(version 0\.4\.0\) has no KV-cache forward "
                                           r"\(evosdpa_forward_workspace_size is missing; C ABI 0\.5\.0 added it\); "
                                           r"rebuild .* evosdpa 0\.5\.0 or newer"):
        _lib.forward_workspace_size(p, None)


def test_a_library_without_variable_length_batches_imports(monkeypatch):
    # A 0.5 library (KV cache, no cu_seqlens fields): binds, zeroes the mirror's extra bytes and runs the
    # forward; asking for the fields of variable-length batches says which version added them.
    def initialises(params, size):
        p = params._obj
        ctypes.memset(ctypes.addressof(p), 0, size)
        p.struct_size, p.softmax_scale = size, math.nan
        return _lib.SUCCESS

    for version, refused in ((b"0.5.0", True), (b"0.5.9", True), (b"0.6.0", False), (b"0.10.0", False),
                             (b"1.0.0-rc1", False)):
        lib = _FakeLibrary(initialises, version=version)
        for name in {**_lib._BACKWARD_SIGNATURES, **_lib._SERVING_SIGNATURES}:
            setattr(lib, name, lambda *args: _lib.SUCCESS)
        assert _lib._bind(lib, "/lib/libevosdpa.so") is lib
        monkeypatch.setattr(_lib, "_lib", lib)
        assert _lib.forward_workspace_size(_lib.new_params(), None)[0] == _lib.SUCCESS
        if refused:
            with pytest.raises(RuntimeError, match=rf"\(version {re.escape(version.decode())}\) has no variable-length "
                                                   r"batches \(evosdpa_params_t lacks cu_seqlens_q, cu_seqlens_k, "
                                                   r"total_q, total_k; C ABI 0\.6\.0 added it\); rebuild .* "
                                                   r"evosdpa 0\.6\.0 or newer"):
                _lib.require_fields("varlen")
        else:
            _lib.require_fields("varlen")


def fields_are_read(edits):
    """Each (fields, words) of `edits`, applied in turn to one small problem's Params, makes the library refuse
    the call with a message holding `words` (checked before any device, so no GPU is needed)."""
    p = _lib.new_params()
    p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k, p.head_dim = 1, 1, 1, 8, 8, 64
    for fields, words in edits:
        for name, value in fields.items():
            setattr(p, name, value)
        code, message, _ = _lib.supports(p)
        assert code == _lib.INVALID_ARGUMENT and words in message, (fields, message)


def test_varlen_fields_reach_the_c_abi():
    # Each of the four 0.6 fields, read by the library where the mirror puts it.
    fields_are_read([({"total_q": 5}, "total_q is 5 but cu_seqlens_q is a null pointer"),
                     ({"total_q": 0, "total_k": 7}, "total_k is 7 but cu_seqlens_k is a null pointer"),
                     ({"cu_seqlens_k": 4096, "k_batch_stride": 512},
                      "k_batch_stride is 512 but cu_seqlens_k packs the sequences"),
                     ({"k_batch_stride": 0, "cu_seqlens_q": 4098}, "cu_seqlens_q is not 4-byte aligned")])


def test_score_mod_fields_reach_the_c_abi():
    # Each of the four 0.7 fields, likewise.
    fields_are_read([({"window_left": 3}, "window_left is 3 without sliding_window"),
                     ({"window_left": 0, "window_right": 4}, "window_right is 4 without sliding_window"),
                     ({"sliding_window": 1, "window_left": -3, "window_right": 0}, "window_left is -3"),
                     ({"window_left": 0, "softcap": -2.0}, "softcap")])


def test_mask_fields_reach_the_c_abi():
    # Each of the five 0.8 fields, likewise.
    fields_are_read([({"mask_type": 5}, "mask_type 5 is not"),
                     ({"mask_type": 0, "mask_batch_stride": 4}, "mask strides are set without a mask"),
                     ({"mask_batch_stride": 0, "mask": 4096}, "mask is set without a mask_type"),
                     ({"mask_type": _lib.MASK_BOOL, "mask_head_stride": -2}, "mask head stride is negative"),
                     ({"mask_head_stride": 0, "mask_seq_stride": -1}, "mask seq stride is negative")])


def test_alibi_fields_reach_the_c_abi():
    # Each of the two 0.9 fields, likewise.
    fields_are_read([({"alibi_batch_stride": 4}, "alibi_batch_stride is set without alibi_slopes"),
                     ({"alibi_slopes": 4096, "alibi_batch_stride": -1}, "alibi_slopes batch stride is negative"),
                     ({"alibi_slopes": 4098, "alibi_batch_stride": 0}, "alibi_slopes is not aligned")])


def test_a_library_without_alibi_is_named(monkeypatch):
    monkeypatch.setattr(_lib, "version", lambda: "0.8.0")
    with pytest.raises(RuntimeError, match=r"has no ALiBi \(evosdpa_params_t lacks alibi_slopes, alibi_batch_stride; "
                                           r"C ABI 0\.9\.0 added it\)"):
        _lib.require_fields("alibi")


def test_a_library_without_mask_tensors_is_named(monkeypatch):
    monkeypatch.setattr(_lib, "version", lambda: "0.7.0")
    with pytest.raises(RuntimeError, match=r"has no mask tensors .* C ABI 0\.8\.0 added it"):
        _lib.require_fields("mask")


def test_a_library_without_score_mods_is_named(monkeypatch):
    monkeypatch.setattr(_lib, "version", lambda: "0.6.3")
    with pytest.raises(RuntimeError, match=r"has no sliding window or softcap .* C ABI 0\.7\.0 added it"):
        _lib.require_fields("score_mods")


def test_forward_workspace_size_from_the_c_abi():
    p = _lib.new_params()
    p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k, p.head_dim = 1, 1, 1, 8, 8, 64
    code, message, size = _lib.forward_workspace_size(p, "auto")
    assert code == _lib.INVALID_ARGUMENT and "q is a null pointer" in message and size == 0
    code, message, size = _lib.forward_workspace_size(p, "warp-speed")
    assert code == _lib.INVALID_ARGUMENT and 'unknown kernel "warp-speed"' in message and size == 0


def test_backward_argument_errors_from_the_c_abi():
    p = _lib.new_params()
    p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k, p.head_dim = 1, 1, 1, 8, 8, 64
    code, message, size = _lib.backward_workspace_size(p, "auto")
    assert code == _lib.INVALID_ARGUMENT and "q is a null pointer" in message and size == 0
    code, message = _lib.backward(p, "auto", 0)
    assert code == _lib.INVALID_ARGUMENT and "q is a null pointer" in message
    code, message, selected = _lib.supports_backward(p, "warp-speed")
    assert code == _lib.INVALID_ARGUMENT and 'unknown kernel "warp-speed"' in message and selected is None


def test_import_fails_cleanly_on_a_library_without_the_new_abi():
    # A real shared object that is not evosdpa 0.2.0 (here: the C library): ImportError, not a crash.
    try:
        with open("/proc/self/maps") as maps:
            libc = next(line.split()[-1] for line in maps if "/libc.so" in line or "/libc-" in line)
    except (OSError, StopIteration):
        pytest.skip("no libc path to stand in for an old library")
    env = dict(os.environ, EVOSDPA_LIBRARY=libc)
    run = subprocess.run([sys.executable, "-c", "import evosdpa"], capture_output=True, text=True, env=env)
    assert run.returncode != 0 and "ImportError" in run.stderr, run.stderr
    assert "(no evosdpa_version(): older than 0.2.0) lacks evosdpa_params_init_sized" in run.stderr, run.stderr


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


def test_op_registered_at_import_after_torch():
    pytest.importorskip("torch")
    code = "import torch, evosdpa; print(hasattr(torch.ops.evosdpa, 'attention_fwd'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


def test_unknown_attribute():
    with pytest.raises(AttributeError):
        evosdpa.no_such_function
