"""PyTorch front end: the `evosdpa::attention_fwd`, `evosdpa::attention_bwd`, `evosdpa::attention_kvcache`
and `evosdpa::attention_varlen` custom ops and the functions users call.

The ops are registered with torch.library (real CUDA implementation + fake implementation), so they work
under torch.compile(fullgraph=True) and inside CUDA-graph capture: outputs (and the backward's workspace)
are allocated by PyTorch, the kernel is launched on PyTorch's current stream, and nothing synchronises the
host.

Autograd: attention_fwd has a formula (torch.library.register_autograd) that saves q, k, v, O and lse and
calls attention_bwd, the library's fused backward pass (P recomputed from lse, never stored). lse is
needed for it, so the user-facing functions ask the op for lse whenever autograd records the call. The
backward's mode travels as attention_fwd's last argument, `deterministic`: True for bitwise repeatable
gradients, False for dQ summed with float32 atomics (faster). lse and the FP8 descales get no gradient,
and FP8 inputs have no backward pass.

The op's `scale: float` is the C ABI's softmax_scale: NaN means the default 1/sqrt(head_dim), any finite
value (0 and negative ones included) is used as given, and an infinite one is refused. The user-facing
functions take scale=None for the default and pass NaN.

FP8 inputs (torch.float8_e4m3fn) carry float32 descales (the real input is stored * descale, as in
FlashAttention-3 and cuDNN): CUDA tensors read by the kernel at run time, of shape () or (1,) (one per
tensor) or (B, Hkv) (one per batch and K/V head: FlashAttention-3's shape, for q too). quantize_fp8 makes
them.

A KV cache (C ABI 0.5, evosdpa.h "Serving"): attention_kvcache reads q [B, Lq, Hq, D] against a cache
that is dense [B, Lk, Hkv, D] or paged [num_pages, page_size, Hkv, D] with an int32 block table, each
sequence up to its own length (cache_seqlens, device memory, so a CUDA graph replays with new lengths).
The library's split-KV kernel may split the keys; the op sizes that workspace through
evosdpa_forward_workspace_size and allocates it with PyTorch. Inference only: its autograd formula raises.

Variable-length batches (C ABI 0.6, evosdpa.h "Variable-length batches"): attention_varlen reads sequences
packed one after another without padding, q [total_q, Hq, D] and k, v [total_k, Hkv, D], split by int32
offsets (cu_seqlens_q, cu_seqlens_k) that stay in device memory: the longest lengths come from the caller
as host ints (max_seqlen_q, max_seqlen_k, FlashAttention's), so the call never reads the GPU and a CUDA
graph replays with new offsets. The Hopper kernel claims work from a counter in the forward's workspace,
which the op sizes and allocates as for a KV cache. Forward only (the library has no varlen backward): its
autograd formula raises.

ALiBi (C ABI 0.9, evosdpa.h "ALiBi"): the three ops take alibi_slopes, FlashAttention's float32 (Hq,) or
(B, Hq) slopes read by the kernel; forward-only (attention_fwd's autograd formula raises for it).
"""
import math
import numbers
from typing import Optional, Tuple

import torch

from . import _lib

_LAYOUTS = ("bhsd", "bshd")
_ALIGNMENTS = {"top_left": _lib.CAUSAL_TOP_LEFT, "bottom_right": _lib.CAUSAL_BOTTOM_RIGHT}
_DTYPES = {torch.float16: _lib.DTYPE_FLOAT16, torch.bfloat16: _lib.DTYPE_BFLOAT16,
           torch.float8_e4m3fn: _lib.DTYPE_FLOAT8_E4M3}
_FP8 = torch.float8_e4m3fn
_FP8_MAX = 448.0  # float8_e4m3fn's largest finite value
_OUT_DTYPES = (torch.float16, torch.bfloat16)
_HEAD_DIMS = (64, 128)
_FLOAT32_MAX = 3.4028234663852886e38
# The largest |scale| the library takes: the kernels scale in the log2 domain, scale * log2(e) a float32.
_SCALE_MAX = _FLOAT32_MAX / math.log2(math.e)
DEFAULT_SCALE = math.nan  # the op's (and the C ABI's) "1/sqrt(head_dim)"


def _user_scale(scale, name: str = "scale") -> float:
    """scale=None or a finite number (0 allowed) -> the op's float: NaN for None. ValueError otherwise;
    `name` is the argument the messages name."""
    if scale is None:
        return DEFAULT_SCALE
    if isinstance(scale, bool) or not isinstance(scale, (numbers.Real, torch.SymFloat, torch.SymInt)):
        raise TypeError(f"evosdpa: {name} must be a float or None, got {type(scale).__name__}")
    scale = float(scale)
    if scale != scale or abs(scale) > _SCALE_MAX:
        raise ValueError(f"evosdpa: {name} must be None or a finite value of magnitude at most {_SCALE_MAX:.4g} "
                         f"(scale * log2(e) a float32; 0 allowed), got {scale}")
    return scale


def _check_op_scale(scale: float) -> None:
    """The op's scale: NaN (default) or finite; shared by the real and the fake implementation."""
    if scale == scale and abs(scale) > _SCALE_MAX:
        raise ValueError(f"evosdpa: scale must be finite and at most {_SCALE_MAX:.4g} in magnitude (NaN for the "
                         f"default 1/sqrt(head_dim)), got {scale}")


def _contiguous_last_dim(t):
    """t, or a contiguous copy when its last dimension is strided (the kernels need stride(-1) == 1)."""
    if isinstance(t, torch.Tensor) and t.dim() > 0 and t.shape[-1] > 1 and t.stride(-1) != 1:
        # Not .contiguous(), which returns a tensor with no elements as it is, strides and all (an
        # expanded gradient of an empty output, say).
        return t.clone(memory_format=torch.contiguous_format)
    return t


_ROW_ALIGN = 16  # bytes: the fast kernels (wgmma_sm90, mma_sm80, splitkv_sm80) copy rows in 16-byte chunks


def _aligned_rows(t):
    """t (a real tensor with a stride-1 last dimension, as the ops' checks require; its pointer is read), or a
    contiguous copy when the fast kernels could not read its rows: a pointer or a stride of a dimension longer
    than 1 that is not a multiple of 16 bytes. They refuse those and "auto" would run the slow reference
    kernel: the gradient of torch.cat([out, x], -1)[..., :D], say, has rows D + x.shape[-1] elements apart."""
    if not isinstance(t, torch.Tensor) or t.numel() == 0:
        return t
    e = t.element_size()
    if t.data_ptr() % _ROW_ALIGN or any(n > 1 and s * e % _ROW_ALIGN for n, s in zip(t.shape[:-1], t.stride()[:-1])):
        return t.clone(memory_format=torch.contiguous_format)
    return t


def _dense(t):
    """t, or a contiguous copy when a dimension longer than 1 has stride 0: the gradient of out.sum() is a
    single 1 expanded to O's shape, which wgmma_sm90's backward cannot read (its tensor maps need nonzero
    strides), so "auto" would take the slower mma_sm80 on Hopper; the copy costs one pass over O's size."""
    if isinstance(t, torch.Tensor) and any(n > 1 and s == 0 for n, s in zip(t.shape, t.stride())):
        return t.clone(memory_format=torch.contiguous_format)
    return t


def _dims(t: torch.Tensor, layout: str):
    """(batch, heads, seq, head_dim) and the matching strides of a 4-D tensor in `layout`."""
    if layout == "bhsd":
        b, h, s, d = t.shape
        sb, sh, ss, _ = t.stride()
    else:
        b, s, h, d = t.shape
        sb, ss, sh, _ = t.stride()
    return (b, h, s, d), (sb, sh, ss)


def _check(q, k, v, layout: str) -> None:
    """Raise TypeError/ValueError naming the problem; shared by the real and the fake implementation."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"evosdpa: {name} must be a torch.Tensor, got {type(t).__name__}")
    if layout not in _LAYOUTS:
        raise ValueError(f"evosdpa: layout must be 'bhsd' or 'bshd', got {layout!r}")
    shape_name = "[B, H, L, D]" if layout == "bhsd" else "[B, L, H, D]"
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"evosdpa: {name} must be 4-D {shape_name} for layout '{layout}', "
                             f"got shape {tuple(t.shape)}")
        if t.dtype not in _DTYPES:
            raise TypeError(f"evosdpa: {name} has dtype {t.dtype}; supported: torch.float16, torch.bfloat16, "
                            "torch.float8_e4m3fn (with descales)")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"evosdpa: q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    (bq, hq, lq, dq), _ = _dims(q, layout)
    (bk, hk, lk, dk), _ = _dims(k, layout)
    (bv, hv, lv, dv), _ = _dims(v, layout)
    if not (bq == bk == bv):
        raise ValueError(f"evosdpa: batch sizes differ: q {bq}, k {bk}, v {bv}")
    if hk != hv:
        raise ValueError(f"evosdpa: k and v head counts differ: {hk} and {hv}")
    if lk != lv:
        raise ValueError(f"evosdpa: k and v sequence lengths differ: {lk} and {lv}")
    if (hk == 0 and hq != 0) or (hk != 0 and hq % hk != 0):  # no heads at all: an empty result
        raise ValueError(f"evosdpa: q heads ({hq}) must be a multiple of k/v heads ({hk})")
    if not (dq == dk == dv):
        raise ValueError(f"evosdpa: head_dim differs: q {dq}, k {dk}, v {dv}")
    if dq not in _HEAD_DIMS:
        raise ValueError(f"evosdpa: head_dim {dq} is not supported (supported: 64, 128)")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(-1) != 1 and t.shape[-1] > 1:
            raise ValueError(f"evosdpa: {name} must have a contiguous last dimension (stride 1), "
                             f"got strides {tuple(t.stride())}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.device.type != "cuda":
            raise ValueError(f"evosdpa: {name} is on {t.device}; evosdpa needs CUDA tensors")
    if not (q.device == k.device == v.device):
        raise ValueError(f"evosdpa: q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")


_DESCALE_NAMES = ("q_descale", "k_descale", "v_descale")


def _out_dtype(q: torch.Tensor, out_dtype) -> torch.dtype:
    """O's dtype: q's for 16-bit inputs, out_dtype (bfloat16 when None) for FP8 ones."""
    if q.dtype != _FP8:
        return q.dtype
    return torch.bfloat16 if out_dtype is None else out_dtype


def _check_fp8(q, k, layout: str, descales, out_dtype) -> None:
    """The FP8 arguments: three float32 descales on q's device, each () / (1,) or (B, Hkv), one
    granularity for all three, and out_dtype float16 or bfloat16; with 16-bit inputs, none of them."""
    if q.dtype != _FP8:
        for name, t in zip(_DESCALE_NAMES, descales):
            if t is not None:
                raise ValueError(f"evosdpa: {name} is given but the inputs are {q.dtype}; descales apply to "
                                 "torch.float8_e4m3fn inputs only")
        if out_dtype is not None and out_dtype != q.dtype:
            raise ValueError(f"evosdpa: out_dtype {out_dtype} is for float8_e4m3fn inputs; with {q.dtype} inputs "
                             "the output has their dtype")
        return
    if out_dtype is not None and out_dtype not in _OUT_DTYPES:
        raise TypeError(f"evosdpa: out_dtype must be torch.float16 or torch.bfloat16 (or None: bfloat16), "
                        f"got {out_dtype}")
    (b, _, _, _), _ = _dims(q, layout)
    (_, hk, _, _), _ = _dims(k, layout)
    shapes = []
    for name, t in zip(_DESCALE_NAMES, descales):
        if t is None:
            raise ValueError(f"evosdpa: float8_e4m3fn inputs need q_descale, k_descale and v_descale; {name} is "
                             "missing (a missing scale is not taken as 1; evosdpa.quantize_fp8 returns them)")
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"evosdpa: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype != torch.float32:
            raise TypeError(f"evosdpa: {name} must be float32, got {t.dtype}")
        if t.device != q.device:
            raise ValueError(f"evosdpa: {name} is on {t.device}, q on {q.device}: descales are read by the kernel "
                             "and must be on q's device")
        per_head = tuple(t.shape) == (b, hk)
        if tuple(t.shape) not in ((), (1,)) and not per_head:
            raise ValueError(f"evosdpa: {name} has shape {tuple(t.shape)}; expected () or (1,) (per tensor) or "
                             f"(batch, heads_kv) = {(b, hk)} (per K/V head)")
        if per_head and any(st < 0 for st in t.stride()):
            raise ValueError(f"evosdpa: {name} has negative strides {tuple(t.stride())}")
        shapes.append(per_head)
    if len(set(shapes)) != 1:
        raise ValueError("evosdpa: q_descale, k_descale and v_descale must share a granularity (all per tensor "
                         f"or all (batch, heads_kv)), got shapes {[tuple(t.shape) for t in descales]}")
    if shapes[0] and len({t.stride() for t in descales}) != 1:
        raise ValueError("evosdpa: the per-head descales must share their strides, got "
                         f"{[tuple(t.stride()) for t in descales]}")


def _outputs(q: torch.Tensor, layout: str, return_lse: bool, out_dtype=None):
    (b, h, lq, _), _ = _dims(q, layout)
    out = torch.empty(q.shape, dtype=_out_dtype(q, out_dtype), device=q.device)
    lse = (torch.empty((b, h, lq), dtype=torch.float32, device=q.device) if return_lse
           else torch.empty((0,), dtype=torch.float32, device=q.device))
    return out, lse


def _set_pointers_and_strides(p, layout: str, **tensors) -> None:
    """For each name=tensor: p.name = its address and p.name_{batch,head,seq}_stride = its strides."""
    for name, t in tensors.items():
        setattr(p, name, t.data_ptr())
        _, strides = _dims(t, layout)
        for dim, stride in zip(("batch", "head", "seq"), strides):
            setattr(p, f"{name}_{dim}_stride", stride)


def _params(q, k, v, out, lse, causal: int, scale: float, layout: str):
    """The Params of attention of q, k, v into out (and lse when not None): pointers, sizes, strides, mask
    and scale, the fields the forward and the backward pass share."""
    p = _lib.new_params()
    (b, hq, lq, d), _ = _dims(q, layout)
    (_, hk, lk, _), _ = _dims(k, layout)
    _set_pointers_and_strides(p, layout, q=q, k=k, v=v, o=out)
    p.lse = None if lse is None else lse.data_ptr()
    p.dtype = _DTYPES[q.dtype]
    p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k, p.head_dim = b, hq, hk, lq, lk, d
    p.softmax_scale = scale
    p.causal = causal
    return p


def _raise_on_failure(code: int, message: str) -> None:
    """A failed call's status as an exception: ValueError for arguments the library refuses, EvosdpaError
    (a RuntimeError) for the rest (device, CUDA)."""
    if code in (_lib.INVALID_ARGUMENT, _lib.NOT_SUPPORTED):
        raise ValueError(f"evosdpa: {message}")
    if code != _lib.SUCCESS:
        raise _lib.EvosdpaError(_lib.status_name(code), message)


def _window_size(window_size) -> Tuple[int, int]:
    """(left, right) from a user's window_size: None or a pair of ints >= -1 (-1: no bound on that side)."""
    if window_size is None:
        return -1, -1
    if (not isinstance(window_size, (tuple, list)) or len(window_size) != 2
            or any(isinstance(w, bool) or not isinstance(w, (numbers.Integral, torch.SymInt)) for w in window_size)):
        raise TypeError(f"evosdpa: window_size must be a pair of ints (left, right), -1 for no bound, got "
                        f"{window_size!r}")
    left, right = (int(w) for w in window_size)
    _check_op_window(left, right)
    return left, right


def _check_op_window(window_left: int, window_right: int) -> None:
    """The ops' window bounds (what _window_size passes them): >= -1 each. Shared by the real and the fake
    implementations: _set_mods would take a bound below -1 for no bound, silently."""
    if window_left < -1 or window_right < -1:
        raise ValueError(f"evosdpa: window_size {(window_left, window_right)}: each bound is >= 0 keys, or -1 for "
                         f"none")


def _user_softcap(softcap) -> float:
    if isinstance(softcap, bool) or not isinstance(softcap, (numbers.Real, torch.SymFloat)):
        raise TypeError(f"evosdpa: softcap must be a float, got {type(softcap).__name__}")
    softcap = float(softcap)
    if not math.isfinite(softcap) or softcap < 0:
        raise ValueError(f"evosdpa: softcap must be finite and >= 0 (0: none), got {softcap}")
    return softcap


def _has_mods(window_left: int, window_right: int, softcap: float) -> bool:
    return window_left >= 0 or window_right >= 0 or softcap != 0.0


def _set_mods(p, window_left: int, window_right: int, softcap: float) -> None:
    """The C ABI's sliding-window and softcap fields (0.7); a library without them raises RuntimeError."""
    if not _has_mods(window_left, window_right, softcap):
        return
    _lib.require_fields("score_mods")
    if window_left >= 0 or window_right >= 0:
        p.sliding_window, p.window_left, p.window_right = 1, window_left, window_right
    p.softcap = softcap


def _check_mask(attn_mask, q, k, layout: str) -> None:
    """A mask tensor for the op: None, or a 4-D bool or q-dtype tensor on q's device whose dimensions are
    each 1 (broadcast) or [B, Hq, Lq, Lk]'s; shared by the real and the fake implementation."""
    if attn_mask is None:
        return
    if not isinstance(attn_mask, torch.Tensor):
        raise TypeError(f"evosdpa: attn_mask must be a torch.Tensor or None, got {type(attn_mask).__name__}")
    if q.dtype == _FP8:
        raise ValueError("evosdpa: attn_mask takes float16 or bfloat16 inputs, not float8_e4m3fn")
    if attn_mask.dtype not in (torch.bool, q.dtype):
        raise TypeError(f"evosdpa: attn_mask must be torch.bool or the inputs' dtype {q.dtype} (an additive mask), "
                        f"got {attn_mask.dtype}")
    (b, hq, lq, _), _ = _dims(q, layout)
    (_, _, lk, _), _ = _dims(k, layout)
    full = (b, hq, lq, lk)
    if attn_mask.dim() != 4 or any(m not in (1, n) for m, n in zip(attn_mask.shape, full)):
        raise ValueError(f"evosdpa: attn_mask of shape {tuple(attn_mask.shape)} does not broadcast to [B, Hq, Lq, Lk] "
                         f"= {full} (each dimension 1 or the full size)")
    if attn_mask.device != q.device:
        raise ValueError(f"evosdpa: attn_mask is on {attn_mask.device}, q on {q.device}")


_MASK_ALIGN = _ROW_ALIGN  # the Hopper kernel copies mask rows in 16-byte chunks too
_DECODE_ROWS = 16  # queries per sequence up to which "auto" decodes on splitkv_sm80 (splitkv_family.cpp)


def _kernel_mask(attn_mask, full):
    """(tensor, (batch, head, seq) strides in elements) of a checked mask as the C ABI reads it: the key
    dimension materialised with stride 1, broadcast dimensions at stride 0, and 16-byte aligned for the
    Hopper kernel (pointer and strides; else a copy with its rows padded to 16 bytes, so that the call is
    not left to the slow reference kernel)."""
    m = attn_mask
    if m.shape[3] != full[3] or (m.stride(3) != 1 and full[3] > 1):
        m = m.expand(*m.shape[:3], full[3]).contiguous()  # only the mask's own rows, not the broadcast ones
    per_chunk = _MASK_ALIGN // m.element_size()  # elements per 16 bytes
    strides = [m.stride(d) if m.shape[d] > 1 else 0 for d in range(3)]
    if m.data_ptr() % _MASK_ALIGN != 0 or any(st % per_chunk for st in strides):
        padded = m.new_empty((*m.shape[:3], -(-full[3] // per_chunk) * per_chunk))[..., :full[3]]
        padded.copy_(m)
        m = padded
        strides = [m.stride(d) if m.shape[d] > 1 else 0 for d in range(3)]
    return m, tuple(strides)


def _set_mask(p, attn_mask, full) -> torch.Tensor:
    """The C ABI's mask fields (0.8) for attn_mask (None: none); returns the tensor the call reads, which
    must stay alive until the launch. A library without them raises RuntimeError."""
    if attn_mask is None:
        return None
    _lib.require_fields("mask")
    m, (sb, sh, ss) = _kernel_mask(attn_mask, full)
    p.mask = m.data_ptr()
    p.mask_type = _lib.MASK_BOOL if m.dtype == torch.bool else _lib.MASK_ADDITIVE
    p.mask_batch_stride, p.mask_head_stride, p.mask_seq_stride = sb, sh, ss
    return m


def _broadcast_mask(attn_mask, full):
    """attn_mask (None, or broadcastable to `full` = (B, Hq, Lq, Lk) by PyTorch's rules: at most 4 dimensions,
    each 1 or the full size, counted from the right) as a 4-D view; ValueError naming the shapes otherwise, and
    TypeError for anything but a tensor (the op's schema would refuse it with the dispatcher's RuntimeError)."""
    if attn_mask is None:
        return None
    if not isinstance(attn_mask, torch.Tensor):
        raise TypeError(f"evosdpa: attn_mask must be a torch.Tensor or None, got {type(attn_mask).__name__}")
    if attn_mask.dim() > 4:
        raise ValueError(f"evosdpa: attn_mask has {attn_mask.dim()} dimensions; it must broadcast to [B, Hq, Lq, Lk] "
                         f"= {tuple(full)}")
    return _unexpanded(attn_mask.reshape((1,) * (4 - attn_mask.dim()) + tuple(attn_mask.shape)))


def _unexpanded(m: torch.Tensor) -> torch.Tensor:
    """m with every expanded dimension (stride 0, size > 1) cut to size 1, a view: the kernels broadcast a
    mask's size-1 dimensions by stride 0, so a copy (a dtype cast, rows padded to 16 bytes) then covers the
    mask's own elements only. transformers' [B, 1, Lq, Lk] masks are often expand()ed views of [B, 1, 1, Lk]
    key padding: copied whole, that was Lq times the bytes on every call of every layer."""
    if m.numel() == 0:
        return m
    return m[tuple(slice(0, 1) if n > 1 and s == 0 else slice(None) for n, s in zip(m.shape, m.stride()))]


def _check_alibi_type(alibi_slopes) -> None:
    """TypeError unless alibi_slopes is a tensor or None, checked by the user-facing functions before the op,
    whose schema (Tensor?) would refuse anything else with the dispatcher's RuntimeError."""
    if alibi_slopes is not None and not isinstance(alibi_slopes, torch.Tensor):
        raise TypeError(f"evosdpa: alibi_slopes must be a torch.Tensor or None, got {type(alibi_slopes).__name__}")


def _check_alibi(alibi_slopes, q, batch: int, heads_q: int) -> None:
    """ALiBi slopes for an op: None, or float32 (Hq,) or (B, Hq) on q's device, with 16-bit inputs; shared by
    the ops' real and fake implementations (which call it after their inputs' checks)."""
    if alibi_slopes is None:
        return
    if q.dtype == _FP8:
        raise ValueError("evosdpa: alibi_slopes takes float16 or bfloat16 inputs, not float8_e4m3fn")
    if alibi_slopes.dtype != torch.float32:
        raise TypeError(f"evosdpa: alibi_slopes must be torch.float32, got {alibi_slopes.dtype}")
    if tuple(alibi_slopes.shape) not in ((heads_q,), (batch, heads_q)):
        raise ValueError(f"evosdpa: alibi_slopes has shape {tuple(alibi_slopes.shape)}; expected (Hq,) = ({heads_q},) "
                         f"(one set for the batch) or (B, Hq) = {(batch, heads_q)}")
    if alibi_slopes.device != q.device:
        raise ValueError(f"evosdpa: alibi_slopes is on {alibi_slopes.device}, q on {q.device}: the kernel reads the "
                         "slopes, so they must be on q's device")


def _set_alibi(p, alibi_slopes) -> torch.Tensor:
    """The C ABI's ALiBi fields (0.9) for checked alibi_slopes (None: none); returns the tensor the call reads,
    which must stay alive until the launch. A library without them raises RuntimeError."""
    if alibi_slopes is None:
        return None
    _lib.require_fields("alibi")
    # The kernels read each entry's slopes as one run of heads: a strided head dimension (a column of a
    # larger tensor, say) is copied, as the mask's rows are padded; the batch dimension keeps any stride.
    slopes = _contiguous_last_dim(alibi_slopes)
    p.alibi_slopes = slopes.data_ptr()
    p.alibi_batch_stride = slopes.stride(0) if slopes.dim() == 2 and slopes.shape[0] > 1 else 0  # (Hq,): shared
    return slopes


@torch.library.custom_op("evosdpa::attention_fwd", mutates_args=())
def attention_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: int, scale: float,
                  return_lse: bool, layout: str, kernel: str, q_descale: Optional[torch.Tensor] = None,
                  k_descale: Optional[torch.Tensor] = None, v_descale: Optional[torch.Tensor] = None,
                  out_dtype: Optional[torch.dtype] = None, deterministic: bool = True, window_left: int = -1,
                  window_right: int = -1, softcap: float = 0.0, attn_mask: Optional[torch.Tensor] = None,
                  alibi_slopes: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """The op: (O, lse); lse is empty unless return_lse. scale: NaN means 1/sqrt(head_dim), any finite value
    (0 included) is used as given, infinity is refused. q, k, v need a contiguous last dimension. FP8
    inputs need the three descales; O is then out_dtype (bfloat16 when None).

    Differentiable in q, k, v (16-bit inputs; see _attention_fwd_backward); lse is not. deterministic is
    the backward pass's mode (the forward ignores it): it is an argument of this op so that autograd, and
    torch.compile's traced backward, carry it from the call to the gradient. window_left, window_right:
    a sliding window's bounds in keys from the diagonal (-1: none); softcap: 0 or c > 0 (evosdpa.h);
    attn_mask: None, or a bool (True: seen) or additive mask of q's dtype, 4-D with each dimension 1 or
    [B, Hq, Lq, Lk]'s (evosdpa.h "Mask tensors"); alibi_slopes: None, or float32 (Hq,) or (B, Hq)
    (evosdpa.h "ALiBi"); all forward-only."""
    descales = (q_descale, k_descale, v_descale)
    _check(q, k, v, layout)
    _check_fp8(q, k, layout, descales, out_dtype)
    _check_op_scale(scale)
    _check_op_window(window_left, window_right)
    _check_mask(attn_mask, q, k, layout)
    q, k, v = _aligned_rows(q), _aligned_rows(k), _aligned_rows(v)
    (b, hq, _, _), _ = _dims(q, layout)
    _check_alibi(alibi_slopes, q, b, hq)
    out, lse = _outputs(q, layout, return_lse, out_dtype)
    p = _params(q, k, v, out, lse if return_lse else None, causal, scale, layout)
    _set_mods(p, window_left, window_right, softcap)
    mask = _set_mask(p, attn_mask, (p.batch, p.heads_q, p.seqlen_q, p.seqlen_k))  # noqa: F841 (kept alive)
    slopes = _set_alibi(p, alibi_slopes)  # noqa: F841 (kept alive)
    if q.dtype == _FP8:
        p.o_dtype = _DTYPES[out.dtype]
        p.q_descale, p.k_descale, p.v_descale = (t.data_ptr() for t in descales)
        if q_descale.dim() == 2:  # (B, Hkv); a per-tensor scale keeps strides 0
            p.descale_batch_stride, p.descale_head_stride = q_descale.stride()
    if p.seqlen_q <= _DECODE_ROWS or kernel == "splitkv_sm80":
        # Decoding shapes run on splitkv_sm80 ("auto"'s choice for them), whose key parts need a workspace:
        # without one a (1, 32, 1, 128) query over 8 K/V heads ran 8 blocks on 132 SMs, whatever the cache.
        _run_with_workspace(p, kernel, q.device, _lib.forward_workspace_size, _lib.forward)
    else:
        with torch.cuda.device(q.device):
            stream = torch.cuda.current_stream(q.device).cuda_stream
            _raise_on_failure(*_lib.forward(p, kernel, stream))
    return out, lse


@attention_fwd.register_fake
def _attention_fwd_fake(q, k, v, causal, scale, return_lse, layout, kernel, q_descale=None, k_descale=None,
                        v_descale=None, out_dtype=None, deterministic=True, window_left=-1, window_right=-1,
                        softcap=0.0, attn_mask=None, alibi_slopes=None):
    _check(q, k, v, layout)
    _check_fp8(q, k, layout, (q_descale, k_descale, v_descale), out_dtype)
    _check_op_scale(scale)
    _check_op_window(window_left, window_right)
    _check_mask(attn_mask, q, k, layout)
    (b, h, lq, _), _ = _dims(q, layout)
    _check_alibi(alibi_slopes, q, b, h)
    out = q.new_empty(q.shape, dtype=_out_dtype(q, out_dtype))
    lse = q.new_empty((b, h, lq) if return_lse else (0,), dtype=torch.float32)
    return out, lse


def _refuse_fp8_backward(q) -> None:
    if q.dtype == _FP8:
        raise NotImplementedError("evosdpa: no backward pass for float8_e4m3fn inputs (the library computes "
                                  "gradients of float16 and bfloat16 attention only)")


def _check_backward(dout, q, k, v, o, lse, layout: str) -> None:
    """The backward op's tensors (dout already with a stride-1 last dimension); shared by the real and the
    fake implementation."""
    _check(q, k, v, layout)
    _refuse_fp8_backward(q)
    for name, t in (("dout", dout), ("o", o), ("lse", lse)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"evosdpa: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.device != q.device:
            raise ValueError(f"evosdpa: {name} is on {t.device}, q on {q.device}")
    for name, t in (("dout", dout), ("o", o)):
        if t.shape != q.shape or t.dtype != q.dtype:
            raise ValueError(f"evosdpa: {name} must have q's shape and dtype {tuple(q.shape)} {q.dtype}, got "
                             f"{tuple(t.shape)} {t.dtype}")
        if t.stride(-1) != 1 and t.shape[-1] > 1:
            raise ValueError(f"evosdpa: {name} must have a contiguous last dimension (stride 1), "
                             f"got strides {tuple(t.stride())}")
    (b, h, lq, _), _ = _dims(q, layout)
    if lse.shape != (b, h, lq) or lse.dtype != torch.float32 or not lse.is_contiguous():
        raise ValueError(f"evosdpa: lse must be the forward's contiguous float32 [B, Hq, Lq] = {(b, h, lq)}, got "
                         f"{tuple(lse.shape)} {lse.dtype} with strides {tuple(lse.stride())}")


def _gradients(q, k, v):
    """dq, dk, dv: new contiguous tensors of q's, k's and v's shapes (so in their layout) and dtype."""
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


@torch.library.custom_op("evosdpa::attention_bwd", mutates_args=())
def attention_bwd(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                  lse: torch.Tensor, causal: int, scale: float, layout: str, kernel: str,
                  deterministic: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The backward op: (dq, dk, dv) of attention_fwd's O for the gradient dout, from the forward's inputs,
    its O and its lse (float32 [B, Hq, Lq]); causal, scale, layout as in attention_fwd, kernel: "auto" or a
    kernel with a backward pass. deterministic: dQ summed in a fixed order (bitwise repeatable) rather than
    with float32 atomics (faster). dout may have any strides (copied when its last dimension is strided)."""
    dout = _contiguous_last_dim(dout)
    _check_backward(dout, q, k, v, o, lse, layout)
    _check_op_scale(scale)
    dout = _dense(dout)
    dout, q, k, v, o = (_aligned_rows(t) for t in (dout, q, k, v, o))
    dq, dk, dv = _gradients(q, k, v)
    p = _params(q, k, v, o, lse, causal, scale, layout)
    _set_pointers_and_strides(p, layout, dout=dout, dq=dq, dk=dk, dv=dv)
    p.backward_mode = _lib.BACKWARD_DETERMINISTIC if deterministic else _lib.BACKWARD_FAST
    _run_with_workspace(p, kernel, q.device, _lib.backward_workspace_size, _lib.backward)
    return dq, dk, dv


def _run_with_workspace(p, kernel, device, workspace_size, run):
    """Size the call's workspace with `workspace_size` (the library's query), allocate it, then `run` the
    call on PyTorch's current stream of `device`."""
    with torch.cuda.device(device):  # the library sizes the workspace for the current device
        code, message, size = workspace_size(p, kernel)
        _raise_on_failure(code, message)
        # From PyTorch's caching allocator on the current stream (so reusable once the kernel is done, and
        # capturable in a CUDA graph); its blocks are 512-byte aligned, above the 16 bytes the ABI needs.
        workspace = torch.empty(size, dtype=torch.uint8, device=device) if size else None
        if workspace is not None:
            p.workspace, p.workspace_size = workspace.data_ptr(), size
        stream = torch.cuda.current_stream(device).cuda_stream
        _raise_on_failure(*run(p, kernel, stream))


@attention_bwd.register_fake
def _attention_bwd_fake(dout, q, k, v, o, lse, causal, scale, layout, kernel, deterministic):
    _check_backward(_contiguous_last_dim(dout), q, k, v, o, lse, layout)
    _check_op_scale(scale)
    return _gradients(q, k, v)


def _attention_fwd_setup_context(ctx, inputs, output):
    q, k, v, causal, scale, return_lse, layout, kernel, _, _, _, _, deterministic, *mods = inputs
    out, lse = output
    ctx.mark_non_differentiable(lse)  # the backward pass has no term for a gradient of lse
    ctx.set_materialize_grads(False)  # so no zeros are made for lse's (absent) gradient
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.options = (causal, scale, layout, kernel, deterministic)
    ctx.has_lse = return_lse
    window_left, window_right, softcap, attn_mask, alibi_slopes = (list(mods) + [-1, -1, 0.0, None, None][len(mods):])
    # What the backward pass lacks (the library's gradients cover causal masks only), named in its error.
    ctx.forward_only = None
    if alibi_slopes is not None:
        ctx.forward_only = "alibi_slopes"
    elif _has_mods(window_left, window_right, softcap) or attn_mask is not None:
        ctx.forward_only = "a sliding window, softcap or attn_mask"


def _attention_fwd_backward(ctx, grad_out, _grad_lse):
    """Gradients of q, k, v through attention_bwd; None for the descales and the non-tensor arguments."""
    q, k, v, out, lse = ctx.saved_tensors
    causal, scale, layout, kernel, deterministic = ctx.options
    _refuse_fp8_backward(q)
    if ctx.forward_only:
        raise NotImplementedError(f"evosdpa: no backward pass with {ctx.forward_only} (the library's gradients cover "
                                  "causal masks only); call it under torch.no_grad() for inference")
    if not ctx.has_lse:
        # The op was called without return_lse (attention() and scaled_dot_product_attention() ask for it
        # whenever a gradient is needed): the backward needs the forward's lse, so compute it again.
        _, lse = torch.ops.evosdpa.attention_fwd(q, k, v, causal, scale, True, layout, kernel)
    dq, dk, dv = torch.ops.evosdpa.attention_bwd(grad_out, q, k, v, out, lse, causal, scale, layout, kernel,
                                                 deterministic)
    return (dq, dk, dv) + (None,) * 15  # causal .. alibi_slopes


torch.library.register_autograd("evosdpa::attention_fwd", _attention_fwd_backward,
                                setup_context=_attention_fwd_setup_context)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
              causal_alignment: str = "top_left", scale: Optional[float] = None, return_lse: bool = False,
              layout: str = "bhsd", kernel: Optional[str] = None, q_descale: Optional[torch.Tensor] = None,
              k_descale: Optional[torch.Tensor] = None, v_descale: Optional[torch.Tensor] = None,
              out_dtype: Optional[torch.dtype] = None, deterministic: bool = True,
              window_size: Tuple[int, int] = (-1, -1), softcap: float = 0.0,
              attn_mask: Optional[torch.Tensor] = None, alibi_slopes: Optional[torch.Tensor] = None):
    """Attention on CUDA tensors: softmax(scale * q k^T [+ masks]) v, differentiable in q, k and v.

    q: [B, Hq, Lq, D], k and v: [B, Hkv, Lk, D] with layout="bhsd" ([B, L, H, D] with "bshd"); any
    strides (a tensor whose last dimension is strided, e.g. a transposed view, is copied with
    .contiguous() first); float16 or bfloat16; D 64 or 128; Hq a multiple of Hkv.
    causal_alignment: "top_left" (PyTorch's is_causal: query i sees keys j <= i) or "bottom_right"
    (FlashAttention's: j <= i + Lk - Lq). scale: None for 1/sqrt(D), else any finite value (0 gives
    uniform weights over the visible keys). kernel: None/"auto", or a name from evosdpa.kernel_names().
    Returns O in q's layout (contiguous), or (O, lse) with lse float32 [B, Hq, Lq] when return_lse. A
    query that sees no key gets O = 0 and lse = -inf.

    Gradients (autograd, torch.compile included) come from the library's fused backward pass, run with
    the same kernel name: None/"auto" picks the fastest kernel with a backward pass, and a named kernel
    without one (splitkv_sm80, mma_fp8_sm89) raises ValueError when the gradient is computed.
    deterministic=True (the default) gives bitwise identical gradients from run to run; False sums dQ
    with float32 atomics, which is faster and may change dQ's last bits between runs (dK and dV stay
    repeatable). lse is not differentiable (it is returned with requires_grad False), nor are the
    descales, and FP8 inputs have no backward pass (NotImplementedError).

    FP8: q, k, v in torch.float8_e4m3fn need q_descale, k_descale, v_descale (float32 CUDA tensors, shape
    () or (1,) per tensor, or (B, Hkv) per batch and K/V head; see quantize_fp8); the real inputs are
    stored * descale. O is out_dtype: torch.bfloat16 (the default, FlashAttention-3's) or torch.float16.

    window_size=(left, right): a sliding window (FlashAttention's): query i sees keys from diagonal - left
    to diagonal + right, -1 for no bound on a side, on top of the causal mask; the diagonal is key i with
    causal_alignment "top_left" and causal, else key i + Lk - Lq (bottom-right, also without causal).
    Mistral's window of W keys is causal=True, window_size=(W - 1, -1). softcap=c > 0: scores become
    c * tanh(s / c) before the softmax (Gemma 2). Both forward-only (NotImplementedError on a gradient),
    16-bit inputs, run by wgmma_sm90 (Hopper), mma_sm80 (sm_80 and newer) and the reference kernel.

    attn_mask: PyTorch SDPA's: a bool tensor (True: the query sees the key) or an additive one (rounded to
    q's dtype; added to the scaled, softcapped scores; -inf hides a key), broadcastable to [B, Hq, Lq, Lk] (whatever
    the layout): [Lq, Lk], [B, 1, 1, Lk] (key padding), [B, 1, Lq, Lk], ... Broadcast dimensions are read
    with stride 0, never copied. Applied on top of causal masks and windows; a query whose every key is
    hidden gets O = 0 and lse = -inf (as PyTorch's SDPA since 2.5; its math backend gave NaN before).
    Forward-only, 16-bit inputs; wgmma_sm90 (Hopper) and mma_sm80 (sm_80 and newer) run it with a window, a softcap or both, the
    reference kernel always.

    alibi_slopes: ALiBi, FlashAttention's: float32 (Hq,) (one set for the batch) or (B, Hq) on q's device.
    Query i of head h of batch entry b adds -alibi_slopes[b, h] * |d(i) - j| to its scaled (and softcapped)
    score of key j, d(i) the window's diagonal: i with causal and "top_left", else i + Lk - Lq; lse is that
    of the biased scores (FlashAttention 2's causal lse is larger by slope * d(i): it adds slope * j, the
    same softmax). A strided head dimension is copied. Forward-only, 16-bit inputs; wgmma_sm90 (Hopper)
    runs it without a window, softcap, attn_mask or scale 0, the reference kernel always.
    """
    if causal_alignment not in _ALIGNMENTS:
        raise ValueError(f"evosdpa: causal_alignment must be 'top_left' or 'bottom_right', got {causal_alignment!r}")
    op_scale = _user_scale(scale)
    window_left, window_right = _window_size(window_size)
    softcap = _user_softcap(softcap)
    _check_alibi_type(alibi_slopes)
    if kernel is not None and not isinstance(kernel, str):
        raise TypeError(f"evosdpa: kernel must be a string, got {type(kernel).__name__}")
    q, k, v = _contiguous_last_dim(q), _contiguous_last_dim(k), _contiguous_last_dim(v)
    _check(q, k, v, layout)
    descales = (q_descale, k_descale, v_descale)
    _check_fp8(q, k, layout, descales, out_dtype)
    (b, hq, lq, _), _ = _dims(q, layout)
    attn_mask = _broadcast_mask(attn_mask, (b, hq, lq, _dims(k, layout)[0][2]))
    if (isinstance(attn_mask, torch.Tensor) and attn_mask.is_floating_point() and q.dtype != _FP8
            and attn_mask.dtype != q.dtype):
        attn_mask = attn_mask.to(q.dtype)  # as PyTorch's fused kernels: the bias in the inputs' precision
    causal_code = _ALIGNMENTS[causal_alignment] if causal else _lib.CAUSAL_NONE
    # The backward pass needs the forward's lse: ask for it whenever autograd will record this call.
    needs_lse = return_lse or (torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)))
    out, lse = torch.ops.evosdpa.attention_fwd(q, k, v, causal_code, op_scale, bool(needs_lse), layout,
                                               kernel or "auto", *descales, out_dtype, bool(deterministic),
                                               window_left, window_right, softcap, attn_mask, alibi_slopes)
    return (out, lse) if return_lse else out


# ---- A KV cache (C ABI 0.5): dense or paged, per-sequence lengths, split-KV ---------------------------

_KV_DTYPES = (torch.float16, torch.bfloat16)
_PAGE_MULTIPLE = 16  # the C ABI's rule: every 16 aligned keys share a page


def _kvcache_seqlen_k(k_cache, block_table):
    """The keys a sequence may have: the dense cache's Lk, or max_blocks * page_size with a block table."""
    return k_cache.shape[1] if block_table is None else block_table.shape[1] * k_cache.shape[1]


def _check_kvcache(q, k_cache, v_cache, cache_seqlens, block_table, num_splits) -> None:
    """Raise TypeError/ValueError naming the bad argument; shared by attention_with_kvcache, the op and its
    fake implementation. Devices are checked last, so everything else can be tested on meta tensors."""
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"evosdpa: {name} must be a torch.Tensor, got {type(t).__name__}")
    for name, t in (("cache_seqlens", cache_seqlens), ("block_table", block_table)):
        if t is not None and not isinstance(t, torch.Tensor):
            raise TypeError(f"evosdpa: {name} must be a torch.Tensor or None, got {type(t).__name__}")
    paged = block_table is not None
    cache_shape = "[num_pages, page_size, Hkv, D] (paged: block_table given)" if paged else "[B, Lk, Hkv, D]"
    if q.dim() != 4:
        raise ValueError(f"evosdpa: q must be 4-D [B, Lq, Hq, D], got shape {tuple(q.shape)}")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if t.dim() != 4:
            raise ValueError(f"evosdpa: {name} must be 4-D {cache_shape}, got shape {tuple(t.shape)}")
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if t.dtype not in _KV_DTYPES:
            raise TypeError(f"evosdpa: {name} has dtype {t.dtype}; supported with a KV cache: torch.float16, "
                            "torch.bfloat16")
    if not (q.dtype == k_cache.dtype == v_cache.dtype):
        raise TypeError(f"evosdpa: q, k_cache, v_cache must share a dtype, got {q.dtype}, {k_cache.dtype}, "
                        f"{v_cache.dtype}")
    if k_cache.shape != v_cache.shape:
        raise ValueError(f"evosdpa: k_cache and v_cache shapes differ: {tuple(k_cache.shape)} and "
                         f"{tuple(v_cache.shape)}")
    b, _, hq, d = q.shape
    _, _, hk, dk = k_cache.shape
    if d != dk:
        raise ValueError(f"evosdpa: head_dim differs: q {d}, k_cache and v_cache {dk}")
    if d not in _HEAD_DIMS:
        raise ValueError(f"evosdpa: head_dim {d} is not supported (supported: 64, 128)")
    if (hk == 0 and hq != 0) or (hk != 0 and hq % hk != 0):  # no heads at all: an empty result
        raise ValueError(f"evosdpa: q heads ({hq}) must be a multiple of k_cache/v_cache heads ({hk})")
    if paged:
        if block_table.dtype != torch.int32:
            raise TypeError(f"evosdpa: block_table must be int32, got {block_table.dtype}")
        if block_table.dim() != 2:
            raise ValueError(f"evosdpa: block_table must be 2-D [B, max_blocks], got shape {tuple(block_table.shape)}")
        if block_table.shape[0] != b:
            raise ValueError(f"evosdpa: block_table has {block_table.shape[0]} rows, q's batch is {b}")
        page_size = k_cache.shape[1]
        if page_size == 0 or page_size % _PAGE_MULTIPLE != 0:
            raise ValueError(f"evosdpa: the page size (k_cache.shape[1] with a block_table) must be a positive "
                             f"multiple of {_PAGE_MULTIPLE}, got {page_size}")
        if block_table.stride(-1) != 1 and block_table.shape[-1] > 1:
            raise ValueError(f"evosdpa: block_table must have a contiguous last dimension (stride 1), got strides "
                             f"{tuple(block_table.stride())}")
        if b > 1 and block_table.stride(0) < block_table.shape[1]:
            raise ValueError(f"evosdpa: block_table's rows overlap (strides {tuple(block_table.stride())} for shape "
                             f"{tuple(block_table.shape)}); pass a contiguous block_table")
    elif k_cache.shape[0] != b:
        raise ValueError(f"evosdpa: k_cache has batch {k_cache.shape[0]}, q {b} (a dense cache is [B, Lk, Hkv, D]; "
                         "a paged one needs block_table)")
    if cache_seqlens is not None:
        if cache_seqlens.dtype != torch.int32:
            raise TypeError(f"evosdpa: cache_seqlens must be int32, got {cache_seqlens.dtype}")
        if tuple(cache_seqlens.shape) != (b,):
            raise ValueError(f"evosdpa: cache_seqlens must have shape (B,) = ({b},), got {tuple(cache_seqlens.shape)}")
        if b > 1 and cache_seqlens.stride(0) != 1:
            raise ValueError(f"evosdpa: cache_seqlens must be contiguous, got stride {cache_seqlens.stride(0)}")
    if num_splits < 0:
        raise ValueError(f"evosdpa: num_splits must be >= 0 (0: the library's choice, 1: no split), got {num_splits}")
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if t.stride(-1) != 1 and t.shape[-1] > 1:
            raise ValueError(f"evosdpa: {name} must have a contiguous last dimension (stride 1), "
                             f"got strides {tuple(t.stride())}")
    named = [("q", q), ("k_cache", k_cache), ("v_cache", v_cache), ("cache_seqlens", cache_seqlens),
             ("block_table", block_table)]
    named = [(name, t) for name, t in named if t is not None]
    for name, t in named:
        if t.device.type != "cuda":
            raise ValueError(f"evosdpa: {name} is on {t.device}; evosdpa needs CUDA tensors")
    if len({t.device for _, t in named}) != 1:
        raise ValueError("evosdpa: q, k_cache, v_cache, cache_seqlens and block_table must be on one device, got "
                         + ", ".join(f"{name} on {t.device}" for name, t in named))


def _kvcache_outputs(q, return_lse: bool, like):
    """O (q's shape, contiguous [B, Lq, Hq, D]) and lse (float32 [B, Hq, Lq], or empty): made by `like`
    (torch.empty for the real op, q.new_empty for the fake one)."""
    b, lq, hq, _ = q.shape
    out = like(q.shape, dtype=q.dtype)
    lse = like((b, hq, lq) if return_lse else (0,), dtype=torch.float32)
    return out, lse


@torch.library.custom_op("evosdpa::attention_kvcache", mutates_args=())
def attention_kvcache(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                      cache_seqlens: Optional[torch.Tensor], block_table: Optional[torch.Tensor], causal: int,
                      scale: float, num_splits: int, return_lse: bool, kernel: str, window_left: int = -1,
                      window_right: int = -1, softcap: float = 0.0,
                      alibi_slopes: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """The KV-cache op: (O, lse), lse empty unless return_lse. q [B, Lq, Hq, D]; k_cache, v_cache dense
    [B, Lk, Hkv, D], or paged [num_pages, page_size, Hkv, D] with block_table int32 [B, max_blocks] (stride 1
    in its last dimension); cache_seqlens None or int32 [B] (contiguous): keys per sequence, device memory
    read by the kernel (values outside [0, seqlen_k] are clamped into it). causal: the C ABI's code
    (CAUSAL_BOTTOM_RIGHT aligns each sequence's queries with its own last key). scale as in attention_fwd.
    num_splits: 0 the library's choice, 1 none, N > 1 exactly N (split-KV kernel only). window_left,
    window_right, softcap and alibi_slopes as in attention_fwd. Not differentiable: its autograd formula
    raises NotImplementedError."""
    _check_kvcache(q, k_cache, v_cache, cache_seqlens, block_table, num_splits)
    _check_op_scale(scale)
    _check_op_window(window_left, window_right)
    _check_alibi(alibi_slopes, q, q.shape[0], q.shape[2])
    q = _aligned_rows(q)  # not the caches: a copy of a cache would cost more than the call
    out, lse = _kvcache_outputs(q, return_lse, lambda shape, dtype: torch.empty(shape, dtype=dtype, device=q.device))
    p = _lib.new_params()
    # [B, L, H, D] for q, O and a dense cache; [num_pages, page_size, H, D] for a paged one, whose batch
    # stride is then the stride between pages (evosdpa.h "Serving").
    _set_pointers_and_strides(p, "bshd", q=q, k=k_cache, v=v_cache, o=out)
    p.lse = lse.data_ptr() if return_lse else None
    p.dtype = _DTYPES[q.dtype]
    b, lq, hq, d = q.shape
    p.batch, p.heads_q, p.heads_kv, p.head_dim = b, hq, k_cache.shape[2], d
    p.seqlen_q, p.seqlen_k = lq, _kvcache_seqlen_k(k_cache, block_table)
    if block_table is not None:
        if block_table.shape[1] == 0:
            # No pages, so no keys (seqlen_k 0). An empty table has no storage (data_ptr 0), which the C ABI
            # would take for no table, with page_size set: INVALID_ARGUMENT. One entry, never read, stands in.
            block_table = block_table.new_zeros(b, 1)
        p.page_table = block_table.data_ptr()
        # One row: its stride is never used, so any (an unsqueezed view's, say) is as good as the row length.
        p.page_table_batch_stride = block_table.stride(0) if b > 1 else block_table.shape[1]
        p.page_size, p.num_pages = k_cache.shape[1], k_cache.shape[0]
    p.seqused_k = None if cache_seqlens is None else cache_seqlens.data_ptr()
    p.softmax_scale = scale
    p.causal = causal
    p.num_splits = num_splits
    _set_mods(p, window_left, window_right, softcap)
    slopes = _set_alibi(p, alibi_slopes)  # noqa: F841 (kept alive)
    _run_with_workspace(p, kernel, q.device, _lib.forward_workspace_size, _lib.forward)  # split-KV partials
    return out, lse


@attention_kvcache.register_fake
def _attention_kvcache_fake(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale, num_splits, return_lse,
                            kernel, window_left=-1, window_right=-1, softcap=0.0, alibi_slopes=None):
    _check_kvcache(q, k_cache, v_cache, cache_seqlens, block_table, num_splits)
    _check_op_scale(scale)
    _check_op_window(window_left, window_right)
    _check_alibi(alibi_slopes, q, q.shape[0], q.shape[2])
    return _kvcache_outputs(q, return_lse, q.new_empty)


def _register_forward_only(op: str, message: str) -> None:
    """A gradient through `op` (whose outputs are O and the lse) raises NotImplementedError(message), a clear
    error rather than PyTorch's warning and a silently missing gradient."""
    def setup_context(ctx, inputs, output):
        ctx.mark_non_differentiable(output[1])

    def backward(ctx, grad_out, _grad_lse):
        raise NotImplementedError(message)

    torch.library.register_autograd(op, backward, setup_context=setup_context)


_register_forward_only("evosdpa::attention_kvcache",
                       "evosdpa: attention_with_kvcache has no backward pass (a KV cache serves inference); call it "
                       "under torch.no_grad() or torch.inference_mode(), or train with evosdpa.attention")


def _rows_apart(table):
    """block_table with rows that do not overlap (an expanded table is copied), last dimension stride 1."""
    table = _contiguous_last_dim(table)
    if (isinstance(table, torch.Tensor) and table.dim() == 2 and table.shape[0] > 1
            and table.stride(0) < table.shape[1]):
        return table.contiguous()
    return table


def attention_with_kvcache(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, cache_seqlens=None,
                           block_table: Optional[torch.Tensor] = None, softmax_scale: Optional[float] = None,
                           causal: bool = False, num_splits: int = 0, return_softmax_lse: bool = False,
                           kernel: Optional[str] = None, window_size: Tuple[int, int] = (-1, -1),
                           softcap: float = 0.0, alibi_slopes: Optional[torch.Tensor] = None):
    """Attention of new queries against a KV cache, dense or paged (FlashAttention's flash_attn_with_kvcache
    argument names), for decoding and chunked prefill. Inference only: no backward pass
    (NotImplementedError if a gradient reaches it).

    q: [B, Lq, Hq, D] (FlashAttention's layout), float16 or bfloat16, D 64 or 128.
    k_cache, v_cache: q's dtype, Hq a multiple of Hkv; either
      dense [B, Lk, Hkv, D], or
      paged [num_pages, page_size, Hkv, D] with block_table int32 [B, max_blocks]: key j of sequence b is
      row j % page_size of page block_table[b, j // page_size]. page_size a multiple of 16 (vLLM's and
      FlashInfer's 16 included). An entry outside [0, num_pages) is never read: its keys count as masked.
    cache_seqlens: None (every sequence has all Lk, or max_blocks * page_size, keys), an int (the same
      length for all), or int32 [B] on q's device: sequence b attends to its keys 0 .. cache_seqlens[b]-1.
      The tensor is read by the kernel (no host synchronisation: a CUDA graph replays with the lengths then
      in it); a value outside [0, Lk] (or [0, max_blocks * page_size]) is clamped into it.
    causal: True aligns the mask bottom-right, per sequence: query i sees key j <= i + cache_seqlens[b] - Lq,
      i.e. the Lq new tokens are the last ones of each sequence's cache.

    Unlike flash_attn_with_kvcache there are no k=/v= arguments to append new keys and values, nor rotary
    embeddings: the caller writes the new tokens' K and V into the cache first, and cache_seqlens counts
    them (the length after appending, where flash_attn_with_kvcache with k=/v= takes the length before).

    softmax_scale: None for 1/sqrt(D), else any finite value (0 included). num_splits: how many parts each
    sequence's keys are split into for split-KV decoding: 0 (the default) lets the library choose, 1 asks
    for no split, N > 1 for N (capped at the number of key blocks). kernel: None/"auto" (the split-KV
    kernel for up to 16 new queries per sequence and for paged caches; the dense kernels for a dense cache
    with more: a chunk of prefill), "splitkv_sm80", "wgmma_sm90" (sm_90) and "mma_sm80" (dense caches, no
    num_splits > 1) or "reference"; the others refuse a KV cache.

    A tensor whose last dimension is strided is copied with .contiguous() first (as attention() does);
    pass stride-1 tensors to avoid the copy, which for a cache is large. Returns O [B, Lq, Hq, D] in q's
    dtype, or (O, lse) with lse float32 [B, Hq, Lq] when return_softmax_lse. A query that sees no key (an
    empty sequence, or Lq > cache_seqlens[b] with causal) gets O = 0 and lse = -inf. window_size and
    softcap as in attention() (the diagonal bottom-right, per sequence: aligned with its cache_seqlens);
    with either the dense kernels run the call (the split-KV decode kernel has neither). alibi_slopes
    likewise: float32 (Hq,) or (B, Hq), the distance taken from that diagonal; run by wgmma_sm90 (a dense
    cache) and the reference kernel (a paged one too).
    """
    op_scale = _user_scale(softmax_scale, "softmax_scale")
    window_left, window_right = _window_size(window_size)
    softcap = _user_softcap(softcap)
    _check_alibi_type(alibi_slopes)
    if kernel is not None and not isinstance(kernel, str):
        raise TypeError(f"evosdpa: kernel must be a string, got {type(kernel).__name__}")
    if isinstance(num_splits, bool) or not isinstance(num_splits, (numbers.Integral, torch.SymInt)):
        raise TypeError(f"evosdpa: num_splits must be an int, got {type(num_splits).__name__}")
    seqlens_int = None
    if isinstance(cache_seqlens, torch.Tensor) and cache_seqlens.is_floating_point():
        # flash_attn_with_kvcache(q, k_cache, v_cache, k, v, ...) passed positionally: this function appends
        # nothing, and its fourth argument is cache_seqlens.
        raise TypeError("evosdpa: cache_seqlens (the 4th argument) must be an int, an int32 tensor [B] or None, "
                        f"got a {cache_seqlens.dtype} tensor: FlashAttention's 4th and 5th arguments k and v (new "
                        "keys and values to append) do not exist here; write them into the cache first and pass "
                        "cache_seqlens= and block_table= by name")
    if cache_seqlens is not None and not isinstance(cache_seqlens, torch.Tensor):
        if isinstance(cache_seqlens, bool) or not isinstance(cache_seqlens, (numbers.Integral, torch.SymInt)):
            raise TypeError("evosdpa: cache_seqlens must be an int, an int32 tensor [B] or None, got "
                            f"{type(cache_seqlens).__name__}")
        seqlens_int, cache_seqlens = cache_seqlens, None
    q, k_cache, v_cache = _contiguous_last_dim(q), _contiguous_last_dim(k_cache), _contiguous_last_dim(v_cache)
    block_table = _rows_apart(block_table)
    if isinstance(cache_seqlens, torch.Tensor) and cache_seqlens.dim() == 1 and cache_seqlens.stride(0) != 1:
        cache_seqlens = cache_seqlens.contiguous()
    _check_kvcache(q, k_cache, v_cache, cache_seqlens, block_table, num_splits)
    if seqlens_int is not None:
        seqlen_k = _kvcache_seqlen_k(k_cache, block_table)
        if seqlens_int < 0 or seqlens_int > seqlen_k:
            raise ValueError(f"evosdpa: cache_seqlens {seqlens_int} is outside [0, {seqlen_k}] (the keys the cache "
                             "holds per sequence)")
        cache_seqlens = torch.full((q.shape[0],), seqlens_int, dtype=torch.int32, device=q.device)
    causal_code = _lib.CAUSAL_BOTTOM_RIGHT if causal else _lib.CAUSAL_NONE
    out, lse = torch.ops.evosdpa.attention_kvcache(q, k_cache, v_cache, cache_seqlens, block_table, causal_code,
                                                   op_scale, num_splits, bool(return_softmax_lse), kernel or "auto",
                                                   window_left, window_right, softcap, alibi_slopes)
    return (out, lse) if return_softmax_lse else out


# ---- Variable-length batches (C ABI 0.6): packed sequences, offsets in device memory ------------------


def _check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q, max_seqlen_k) -> None:
    """Raise TypeError/ValueError naming the bad argument; shared by attention_varlen, the op and its fake
    implementation. Devices are checked last, so everything else can be tested on meta tensors."""
    for name, t in (("q", q), ("k", k), ("v", v), ("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"evosdpa: {name} must be a torch.Tensor, got {type(t).__name__}")
    if seqused_k is not None and not isinstance(seqused_k, torch.Tensor):
        raise TypeError(f"evosdpa: seqused_k must be a torch.Tensor or None, got {type(seqused_k).__name__}")
    for name, t, shape in (("q", q, "[total_q, Hq, D]"), ("k", k, "[total_k, Hkv, D]"), ("v", v, "[total_k, Hkv, D]")):
        if t.dim() != 3:
            raise ValueError(f"evosdpa: {name} must be 3-D {shape} (sequences packed along dimension 0), got shape "
                             f"{tuple(t.shape)}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype not in _KV_DTYPES:
            raise TypeError(f"evosdpa: {name} has dtype {t.dtype}; supported with variable-length batches: "
                            "torch.float16, torch.bfloat16")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"evosdpa: q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if k.shape != v.shape:
        raise ValueError(f"evosdpa: k and v shapes differ: {tuple(k.shape)} and {tuple(v.shape)}")
    _, hq, d = q.shape
    _, hk, dk = k.shape
    if d != dk:
        raise ValueError(f"evosdpa: head_dim differs: q {d}, k and v {dk}")
    if d not in _HEAD_DIMS:
        raise ValueError(f"evosdpa: head_dim {d} is not supported (supported: 64, 128)")
    if (hk == 0 and hq != 0) or (hk != 0 and hq % hk != 0):  # no heads at all: an empty result
        raise ValueError(f"evosdpa: q heads ({hq}) must be a multiple of k/v heads ({hk})")
    for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if t.dtype != torch.int32:
            raise TypeError(f"evosdpa: {name} must be int32, got {t.dtype}")
        if t.dim() != 1 or t.shape[0] == 0:
            raise ValueError(f"evosdpa: {name} must be 1-D [B + 1] (sequence b is rows {name}[b] .. "
                             f"{name}[b+1]-1), got shape {tuple(t.shape)}")
        if t.shape[0] > 1 and t.stride(0) != 1:
            raise ValueError(f"evosdpa: {name} must be contiguous, got stride {t.stride(0)}")
    b = cu_seqlens_q.shape[0] - 1
    if cu_seqlens_k.shape[0] != b + 1:
        raise ValueError(f"evosdpa: cu_seqlens_k has {cu_seqlens_k.shape[0]} entries, cu_seqlens_q "
                         f"{cu_seqlens_q.shape[0]}: both are [B + 1] for the same B sequences")
    if seqused_k is not None:
        if seqused_k.dtype != torch.int32:
            raise TypeError(f"evosdpa: seqused_k must be int32, got {seqused_k.dtype}")
        if tuple(seqused_k.shape) != (b,):
            raise ValueError(f"evosdpa: seqused_k must have shape (B,) = ({b},), got {tuple(seqused_k.shape)}")
        if b > 1 and seqused_k.stride(0) != 1:
            raise ValueError(f"evosdpa: seqused_k must be contiguous, got stride {seqused_k.stride(0)}")
    for name, n in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if n < 0:
            raise ValueError(f"evosdpa: {name} must be >= 0, got {n}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(-1) != 1 and t.shape[-1] > 1:
            raise ValueError(f"evosdpa: {name} must have a contiguous last dimension (stride 1), "
                             f"got strides {tuple(t.stride())}")
    named = [("q", q), ("k", k), ("v", v), ("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k),
             ("seqused_k", seqused_k)]
    named = [(name, t) for name, t in named if t is not None]
    for name, t in named:
        if t.device.type != "cuda":
            raise ValueError(f"evosdpa: {name} is on {t.device}; evosdpa needs CUDA tensors")
    if len({t.device for _, t in named}) != 1:
        raise ValueError("evosdpa: q, k, v, cu_seqlens_q, cu_seqlens_k and seqused_k must be on one device, got "
                         + ", ".join(f"{name} on {t.device}" for name, t in named))


def _varlen_outputs(q, return_lse: bool, like):
    """O (q's shape, contiguous [total_q, Hq, D]) and lse (float32 [Hq, total_q], or empty): made by `like`
    (torch.empty for the real op, q.new_empty for the fake one)."""
    total_q, hq, _ = q.shape
    out = like(q.shape, dtype=q.dtype)
    lse = like((hq, total_q) if return_lse else (0,), dtype=torch.float32)
    return out, lse


@torch.library.custom_op("evosdpa::attention_varlen", mutates_args=())
def attention_varlen_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                        cu_seqlens_k: torch.Tensor, seqused_k: Optional[torch.Tensor], max_seqlen_q: int,
                        max_seqlen_k: int, causal: int, scale: float, return_lse: bool, kernel: str,
                        window_left: int = -1, window_right: int = -1, softcap: float = 0.0,
                        alibi_slopes: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """The variable-length op: (O, lse), lse empty unless return_lse. q [total_q, Hq, D], k and v
    [total_k, Hkv, D] (stride 1 in their last dimension); cu_seqlens_q, cu_seqlens_k int32 [B + 1]
    (contiguous) and seqused_k None or int32 [B]: device memory read by the kernel (the library clamps their
    values, evosdpa.h). max_seqlen_q, max_seqlen_k: the longest sequences (the C ABI's seqlen_q, seqlen_k).
    causal: the C ABI's code, applied per sequence. scale, window_left, window_right, softcap and alibi_slopes
    (B the number of sequences) as in attention_fwd (the diagonal per sequence). O is [total_q, Hq, D]; lse
    float32 [Hq, total_q]. Not differentiable: its autograd formula raises NotImplementedError."""
    _check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q, max_seqlen_k)
    _check_op_scale(scale)
    _check_op_window(window_left, window_right)
    _check_alibi(alibi_slopes, q, cu_seqlens_q.shape[0] - 1, q.shape[1])
    _lib.require_fields("varlen")
    q, k, v = _aligned_rows(q), _aligned_rows(k), _aligned_rows(v)
    out, lse = _varlen_outputs(q, return_lse, lambda shape, dtype: torch.empty(shape, dtype=dtype, device=q.device))
    p = _lib.new_params()
    # Packed [total, H, D]: one run of rows, so the batch strides stay 0 (evosdpa.h) and each sequence's
    # rows are found through the offsets.
    for name, t in (("q", q), ("k", k), ("v", v), ("o", out)):
        setattr(p, name, t.data_ptr())
        setattr(p, f"{name}_head_stride", t.stride(1))
        setattr(p, f"{name}_seq_stride", t.stride(0))
    p.lse = lse.data_ptr() if return_lse else None
    p.dtype = _DTYPES[q.dtype]
    p.batch, p.heads_q, p.heads_kv, p.head_dim = cu_seqlens_q.shape[0] - 1, q.shape[1], k.shape[1], q.shape[2]
    p.seqlen_q, p.seqlen_k = max_seqlen_q, max_seqlen_k
    p.cu_seqlens_q, p.cu_seqlens_k = cu_seqlens_q.data_ptr(), cu_seqlens_k.data_ptr()
    p.total_q, p.total_k = q.shape[0], k.shape[0]
    p.seqused_k = None if seqused_k is None else seqused_k.data_ptr()
    p.softmax_scale = scale
    p.causal = causal
    _set_mods(p, window_left, window_right, softcap)
    slopes = _set_alibi(p, alibi_slopes)  # noqa: F841 (kept alive)
    # wgmma_sm90's blocks claim work from a counter in the workspace (evosdpa.h), allocated after O and lse.
    _run_with_workspace(p, kernel, q.device, _lib.forward_workspace_size, _lib.forward)
    return out, lse


@attention_varlen_op.register_fake
def _attention_varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q, max_seqlen_k, causal, scale,
                           return_lse, kernel, window_left=-1, window_right=-1, softcap=0.0, alibi_slopes=None):
    _check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q, max_seqlen_k)
    _check_op_scale(scale)
    _check_op_window(window_left, window_right)
    _check_alibi(alibi_slopes, q, cu_seqlens_q.shape[0] - 1, q.shape[1])
    return _varlen_outputs(q, return_lse, q.new_empty)


_register_forward_only("evosdpa::attention_varlen",
                       "evosdpa: attention_varlen has no backward pass (the library computes gradients of padded "
                       "batches only); call it under torch.no_grad() or torch.inference_mode(), or train with "
                       "evosdpa.attention")


def _contiguous_1d(t):
    """t, or a contiguous copy of a strided 1-D tensor (the kernel reads the offsets and lengths densely)."""
    if isinstance(t, torch.Tensor) and t.dim() == 1 and t.shape[0] > 1 and t.stride(0) != 1:
        return t.contiguous()
    return t


def attention_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                     cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, *,
                     softmax_scale: Optional[float] = None, causal: bool = False, return_softmax_lse: bool = False,
                     seqused_k: Optional[torch.Tensor] = None, kernel: Optional[str] = None,
                     window_size: Tuple[int, int] = (-1, -1), softcap: float = 0.0,
                     alibi_slopes: Optional[torch.Tensor] = None):
    """Attention over a batch of sequences of different lengths packed without padding (FlashAttention's
    flash_attn_varlen_func argument names). Inference only: no backward pass (NotImplementedError if a
    gradient reaches it).

    q: [total_q, Hq, D], the queries of all sequences one after another; k, v: [total_k, Hkv, D] likewise.
      float16 or bfloat16, D 64 or 128, Hq a multiple of Hkv (grouped-query attention: query head h reads
      K/V head h // (Hq / Hkv)). Any strides with a contiguous last dimension (a slice along the heads, say);
      a strided last dimension is copied with .contiguous() first.
    cu_seqlens_q, cu_seqlens_k: int32 [B + 1] on q's device, the cumulative lengths: sequence b's queries are
      rows cu_seqlens_q[b] .. cu_seqlens_q[b+1]-1 of q, its keys rows cu_seqlens_k[b] .. cu_seqlens_k[b+1]-1
      of k and v (so cu_seqlens[0] = 0 and cu_seqlens[B] = the total; a query sequence may be longer or
      shorter than its key sequence, and empty).
    max_seqlen_q, max_seqlen_k: the longest query and key sequence, as Python ints: the offsets stay in
      device memory, read by the kernel only, so the call never synchronises with the GPU and a CUDA graph
      replays with new offsets (lengths up to the captured maxima). A sequence longer than its maximum has
      only its first max_seqlen_q queries computed (sees only its first max_seqlen_k keys).
    softmax_scale: None for 1/sqrt(D), else any finite value (0 included).
    causal: True applies a bottom-right causal mask within each sequence (FlashAttention's convention): query
      i of sequence b sees key j when j <= i + len_k(b) - len_q(b), so that its last query sees its last key.
      With equal query and key lengths (self-attention over the packed prompts) that is the usual top-left
      mask j <= i; a sequence with more queries than keys has leading queries that see no key.
    seqused_k: None, or int32 [B] on q's device: sequence b attends to only the first
      min(len_k(b), seqused_k[b]) of its keys (the causal mask then aligns with that length).
    kernel: None/"auto", "wgmma_sm90" (sm_90), "mma_sm80" or "reference"; the other kernels refuse packed
      sequences.

    Returns O [total_q, Hq, D] in q's dtype (contiguous), or (O, lse) when return_softmax_lse, with lse float32
    [Hq, total_q] (FlashAttention 2.4+'s varlen layout: lse[h, cu_seqlens_q[b] + i] for query i of sequence b),
    the natural-log log-sum-exp of the scaled, masked scores. A query that sees no key (an empty key
    sequence, or a leading query of a causal sequence with len_q > len_k) gets O = 0 and lse = -inf. Rows of
    O (and lse) that belong to no sequence (past cu_seqlens_q[B], or past a sequence's first max_seqlen_q)
    are left unwritten, as in FlashAttention: the outputs are allocated with torch.empty.

    window_size=(left, right), softcap and alibi_slopes (float32 (Hq,) or (B, Hq), B the number of
    sequences) as in attention(), the diagonal bottom-right per sequence (FlashAttention's varlen window
    and ALiBi): wgmma_sm90 and the reference kernel run them.

    Unlike flash_attn_varlen_func there is no dropout or block table (a paged KV cache is read by
    attention_with_kvcache), and the arguments after max_seqlen_k are keyword-only, so that a ported
    positional dropout_p cannot land in softmax_scale.
    """
    op_scale = _user_scale(softmax_scale, "softmax_scale")
    window_left, window_right = _window_size(window_size)
    softcap = _user_softcap(softcap)
    _check_alibi_type(alibi_slopes)
    if kernel is not None and not isinstance(kernel, str):
        raise TypeError(f"evosdpa: kernel must be a string, got {type(kernel).__name__}")
    for name, n in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if isinstance(n, bool) or not isinstance(n, (numbers.Integral, torch.SymInt)):
            raise TypeError(f"evosdpa: {name} must be an int (the longest sequence's length, known on the host so "
                            f"that the call does not read the GPU), got {type(n).__name__}")
    q, k, v = _contiguous_last_dim(q), _contiguous_last_dim(k), _contiguous_last_dim(v)
    cu_seqlens_q, cu_seqlens_k, seqused_k = (_contiguous_1d(t) for t in (cu_seqlens_q, cu_seqlens_k, seqused_k))
    _check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q, max_seqlen_k)
    causal_code = _lib.CAUSAL_BOTTOM_RIGHT if causal else _lib.CAUSAL_NONE
    out, lse = torch.ops.evosdpa.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q,
                                                  max_seqlen_k, causal_code, op_scale, bool(return_softmax_lse),
                                                  kernel or "auto", window_left, window_right, softcap, alibi_slopes)
    return (out, lse) if return_softmax_lse else out


def quantize_fp8(x: torch.Tensor, granularity: str = "tensor", *, layout: str = "bhsd",
                 heads_kv: Optional[int] = None):
    """(x_fp8, descale) for evosdpa.attention: x / descale rounded to torch.float8_e4m3fn, with
    descale = amax / 448 so that x's largest magnitude maps to E4M3's largest value.

    x: 4-D [B, H, L, D] ("bhsd") or [B, L, H, D] ("bshd"). granularity "tensor": one scale, descale of
    shape (). "head": one per batch and K/V head, descale (B, Hkv), the shape attention takes: heads_kv
    (default H) groups x's heads as attention does (query head h belongs to K/V head h // (H // Hkv)), so
    pass the key's head count when quantising a grouped q. Values are clamped to +-448 before the
    conversion, so the result does not depend on how a PyTorch release converts overflow. A slice of
    zeros gets descale 1. A slice holding NaN or an infinity gets descale NaN or inf, so that attention over
    it is NaN as PyTorch's would be (a check would synchronise with the GPU: none is made).
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"evosdpa: x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 4:
        raise ValueError(f"evosdpa: x must be 4-D, got shape {tuple(x.shape)}")
    if layout not in _LAYOUTS:
        raise ValueError(f"evosdpa: layout must be 'bhsd' or 'bshd', got {layout!r}")
    if granularity not in ("tensor", "head"):
        raise ValueError(f"evosdpa: granularity must be 'tensor' or 'head', got {granularity!r}")
    if not x.is_floating_point() or x.dtype == _FP8:
        raise TypeError(f"evosdpa: x must be a floating-point tensor to quantise, got {x.dtype}")
    xb = x if layout == "bhsd" else x.transpose(1, 2)  # [B, H, L, D] view
    b, h, _, _ = xb.shape
    hk = h if heads_kv is None else int(heads_kv)
    if hk <= 0 or h % hk != 0:
        raise ValueError(f"evosdpa: x's heads ({h}) must be a multiple of heads_kv ({hk})")
    xf = xb.float()
    if granularity == "tensor":
        amax = xf.abs().amax() if xf.numel() else torch.zeros((), device=x.device)
        scale_per_head = amax.expand(b, h)
    else:
        amax = (xf.abs().reshape(b, hk, -1).amax(dim=2) if xf.numel() else torch.zeros((b, hk), device=x.device))
        scale_per_head = amax.repeat_interleave(h // hk, dim=1)
    # Only an all-zero slice takes 1: a NaN amax (NaN > 0 is False) gave 1 too, leaving x unscaled.
    descale = torch.where(amax != 0, amax / _FP8_MAX, torch.ones_like(amax)).to(torch.float32)
    per_head = torch.where(scale_per_head != 0, scale_per_head / _FP8_MAX, torch.ones_like(scale_per_head))
    q8 = (xf / per_head[:, :, None, None]).clamp(-_FP8_MAX, _FP8_MAX).to(_FP8)
    if layout == "bshd":
        q8 = q8.transpose(1, 2)
    return q8.contiguous(), descale


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask=None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: Optional[float] = None,
                                 enable_gqa: bool = False) -> torch.Tensor:
    """torch.nn.functional.scaled_dot_product_attention's signature and semantics (top-left causal mask).

    query (*batch, Hq, L, E), key and value (*batch, Hkv, S, E): any number of leading batch dimensions
    (flattened into one for the kernel and restored on the output), 3-D (H, L, E) and 2-D (L, E) inputs
    included, as PyTorch accepts. The leading dimensions of key and value must equal the query's (no
    broadcasting); Hkv must equal Hq unless enable_gqa (then Hq is a multiple of Hkv, grouped by
    dimension -3 as PyTorch does). scale: None for 1/sqrt(E), else any finite value, 0 included. A
    strided last dimension is copied with .contiguous(). attn_mask: bool (True: take part) or additive
    of the query's dtype, broadcastable to (*batch, Hq, L, S) as PyTorch's; not with is_causal (ValueError,
    as PyTorch). A query whose every key is masked gets 0 (as PyTorch's SDPA since 2.5; its math backend
    gave NaN before). Under torch.autocast("cuda") floating-point inputs and masks (float64 aside) are cast
    to its dtype first, as autocast does for PyTorch's SDPA. Arguments not supported yet raise
    NotImplementedError naming the argument.

    Differentiable in query, key and value, always with the deterministic backward pass (bitwise
    identical gradients from run to run); evosdpa.attention(deterministic=False) has the faster one."""
    if attn_mask is not None and is_causal:
        raise ValueError("evosdpa: an explicit attn_mask cannot be combined with is_causal=True (as in PyTorch)")
    if dropout_p != 0.0:
        raise NotImplementedError("evosdpa.scaled_dot_product_attention: dropout_p != 0 is not supported yet")
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"evosdpa: {name} must be a torch.Tensor, got {type(t).__name__}")
    if torch.is_autocast_enabled("cuda"):
        # PyTorch's SDPA is on autocast's lower-precision list: its floating-point CUDA tensors other than
        # float64 (the inputs and an additive mask) run in the autocast dtype. The custom op is not
        # autocast-aware, so the drop-in casts as autocast does (float32 q/k/v would raise TypeError).
        dtype = torch.get_autocast_dtype("cuda")

        def autocast(t):
            if (isinstance(t, torch.Tensor) and t.is_cuda and t.is_floating_point() and t.dtype != torch.float64
                    and t.dtype != dtype):
                return t.to(dtype)
            return t

        query, key, value, attn_mask = (autocast(t) for t in (query, key, value, attn_mask))
    dims = (query.dim(), key.dim(), value.dim())
    if min(dims) < 2:
        raise ValueError("evosdpa: query, key and value must be at least 2-D (..., L, E), got "
                         f"{dims[0]}-D, {dims[1]}-D and {dims[2]}-D")
    if value.shape[-1] != query.shape[-1]:
        raise NotImplementedError("evosdpa.scaled_dot_product_attention: a value head dim different from the "
                                  "query's is not supported yet")
    if enable_gqa and min(dims) < 3:
        raise ValueError("evosdpa: enable_gqa needs a heads dimension (inputs of at least 3 dimensions, "
                         f"(..., H, L, E)), got {dims[0]}-D, {dims[1]}-D and {dims[2]}-D")
    if not (dims[0] == dims[1] == dims[2]) or not (query.shape[:-3] == key.shape[:-3] == value.shape[:-3]):
        raise ValueError("evosdpa: query, key and value must have the same leading (batch) dimensions; "
                         "broadcasting them is not supported: got shapes "
                         f"{tuple(query.shape)}, {tuple(key.shape)} and {tuple(value.shape)}")
    if query.dim() >= 3 and query.shape[-3] != key.shape[-3] and not enable_gqa:
        raise ValueError(f"evosdpa: query has {query.shape[-3]} heads and key {key.shape[-3]}; heads are not "
                         "broadcast: pass enable_gqa=True for grouped-query attention")
    batch = tuple(query.shape[:-3])
    b = math.prod(batch)

    def as_bhsd(t):
        if t.dim() == 2:
            return t.reshape(1, 1, *t.shape)  # (L, E) -> (1, 1, L, E): a view
        return t.reshape(b, *t.shape[-3:])  # a view where the batch dims allow it, a copy otherwise

    if isinstance(attn_mask, torch.Tensor) and query.dim() > 4:
        if attn_mask.dim() > query.dim():
            raise ValueError(f"evosdpa: attn_mask of shape {tuple(attn_mask.shape)} has more dimensions than the "
                             f"query {tuple(query.shape)}")
        # Several batch dimensions: broadcast over them, then flatten them as the inputs are (a view where
        # the mask is the same for all of them: its batch dimensions then keep stride 0).
        if attn_mask.dim() >= 3:
            try:
                attn_mask = attn_mask.expand(*batch, *attn_mask.shape[-3:])
            except RuntimeError:
                raise ValueError(f"evosdpa: attn_mask of shape {tuple(attn_mask.shape)} does not broadcast to the "
                                 f"query's batch dimensions {batch} (query {tuple(query.shape)})") from None
        attn_mask = attn_mask.reshape(b, *attn_mask.shape[-3:]) if attn_mask.dim() > 4 else attn_mask
    out = attention(as_bhsd(query), as_bhsd(key), as_bhsd(value), causal=is_causal, causal_alignment="top_left",
                    scale=scale, layout="bhsd", attn_mask=attn_mask)
    return out.reshape(query.shape)
