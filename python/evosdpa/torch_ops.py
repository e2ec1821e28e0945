"""PyTorch front end: the `evosdpa::attention_fwd` custom op and the functions users call.

The op is registered with torch.library (real CUDA implementation + fake implementation), so it works
under torch.compile(fullgraph=True) and inside CUDA-graph capture: outputs are allocated by PyTorch, the
kernel is launched on PyTorch's current stream, and nothing synchronises the host.
"""
from typing import Optional, Tuple

import torch

from . import _lib

_LAYOUTS = ("bhsd", "bshd")
_ALIGNMENTS = {"top_left": _lib.CAUSAL_TOP_LEFT, "bottom_right": _lib.CAUSAL_BOTTOM_RIGHT}
_DTYPES = {torch.float16: _lib.DTYPE_FLOAT16, torch.bfloat16: _lib.DTYPE_BFLOAT16}
_HEAD_DIMS = (64, 128)


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
            raise TypeError(f"evosdpa: {name} has dtype {t.dtype}; supported: torch.float16, torch.bfloat16")
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
    if hk == 0 or hq % hk != 0:
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


def _outputs(q: torch.Tensor, layout: str, return_lse: bool):
    (b, h, lq, _), _ = _dims(q, layout)
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = (torch.empty((b, h, lq), dtype=torch.float32, device=q.device) if return_lse
           else torch.empty((0,), dtype=torch.float32, device=q.device))
    return out, lse


@torch.library.custom_op("evosdpa::attention_fwd", mutates_args=())
def attention_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: int, scale: float,
                  return_lse: bool, layout: str, kernel: str) -> Tuple[torch.Tensor, torch.Tensor]:
    """The op: (O, lse); lse is empty unless return_lse. scale 0.0 means 1/sqrt(head_dim)."""
    _check(q, k, v, layout)
    out, lse = _outputs(q, layout, return_lse)
    p = _lib.new_params()
    (b, hq, lq, d), (qb, qh, qs) = _dims(q, layout)
    (_, hk, lk, _), (kb, kh, ks) = _dims(k, layout)
    _, (vb, vh, vs) = _dims(v, layout)
    _, (ob, oh, os_) = _dims(out, layout)
    p.q, p.k, p.v, p.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr()
    p.lse = lse.data_ptr() if return_lse else None
    p.dtype = _DTYPES[q.dtype]
    p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k, p.head_dim = b, hq, hk, lq, lk, d
    p.q_batch_stride, p.q_head_stride, p.q_seq_stride = qb, qh, qs
    p.k_batch_stride, p.k_head_stride, p.k_seq_stride = kb, kh, ks
    p.v_batch_stride, p.v_head_stride, p.v_seq_stride = vb, vh, vs
    p.o_batch_stride, p.o_head_stride, p.o_seq_stride = ob, oh, os_
    p.softmax_scale = scale
    p.causal = causal
    with torch.cuda.device(q.device):
        stream = torch.cuda.current_stream(q.device).cuda_stream
        code, message = _lib.forward(p, kernel, stream)
    if code in (_lib.INVALID_ARGUMENT, _lib.NOT_SUPPORTED):
        raise ValueError(f"evosdpa: {message}")
    if code != _lib.SUCCESS:
        raise _lib.EvosdpaError(_lib.status_name(code), message)
    return out, lse


@attention_fwd.register_fake
def _attention_fwd_fake(q, k, v, causal, scale, return_lse, layout, kernel):
    _check(q, k, v, layout)
    (b, h, lq, _), _ = _dims(q, layout)
    out = q.new_empty(q.shape)
    lse = q.new_empty((b, h, lq) if return_lse else (0,), dtype=torch.float32)
    return out, lse


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
              causal_alignment: str = "top_left", scale: Optional[float] = None, return_lse: bool = False,
              layout: str = "bhsd", kernel: Optional[str] = None):
    """Attention forward on CUDA tensors: softmax(scale * q k^T [+ causal mask]) v.

    q: [B, Hq, Lq, D], k and v: [B, Hkv, Lk, D] with layout="bhsd" ([B, L, H, D] with "bshd"); any
    strides with a contiguous last dimension; float16 or bfloat16; D 64 or 128; Hq a multiple of Hkv.
    causal_alignment: "top_left" (PyTorch's is_causal: query i sees keys j <= i) or "bottom_right"
    (FlashAttention's: j <= i + Lk - Lq). scale: default 1/sqrt(D). kernel: None/"auto", or a name from
    evosdpa.kernel_names(). Returns O in q's layout, or (O, lse) with lse float32 [B, Hq, Lq] when
    return_lse. A query that sees no key gets O = 0 and lse = -inf.
    """
    if causal_alignment not in _ALIGNMENTS:
        raise ValueError(f"evosdpa: causal_alignment must be 'top_left' or 'bottom_right', got {causal_alignment!r}")
    if scale is not None and (scale == 0.0 or scale != scale or abs(scale) == float("inf")):
        raise ValueError(f"evosdpa: scale must be finite and non-zero, got {scale}")
    if kernel is not None and not isinstance(kernel, str):
        raise TypeError(f"evosdpa: kernel must be a string, got {type(kernel).__name__}")
    _check(q, k, v, layout)
    causal_code = _ALIGNMENTS[causal_alignment] if causal else _lib.CAUSAL_NONE
    out, lse = torch.ops.evosdpa.attention_fwd(q, k, v, causal_code, float(scale or 0.0), bool(return_lse),
                                               layout, kernel or "auto")
    return (out, lse) if return_lse else out


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask=None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: Optional[float] = None,
                                 enable_gqa: bool = False) -> torch.Tensor:
    """torch.nn.functional.scaled_dot_product_attention's signature and semantics (top-left causal mask),
    for 3-D [H, L, E] and 4-D [B, H, L, E] inputs. Arguments not supported yet raise NotImplementedError
    naming the argument."""
    if attn_mask is not None:
        raise NotImplementedError("evosdpa.scaled_dot_product_attention: attn_mask is not supported yet")
    if dropout_p != 0.0:
        raise NotImplementedError("evosdpa.scaled_dot_product_attention: dropout_p != 0 is not supported yet")
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"evosdpa: {name} must be a torch.Tensor, got {type(t).__name__}")
    if not (query.dim() == key.dim() == value.dim()) or query.dim() not in (3, 4):
        raise NotImplementedError("evosdpa.scaled_dot_product_attention: only 3-D [H, L, E] and 4-D [B, H, L, E] "
                                  f"inputs are supported yet, got {query.dim()}-D, {key.dim()}-D, {value.dim()}-D")
    if value.shape[-1] != query.shape[-1]:
        raise NotImplementedError("evosdpa.scaled_dot_product_attention: a value head dim different from the "
                                  "query's is not supported yet")
    if query.shape[-3] != key.shape[-3] and not enable_gqa:
        raise ValueError(f"evosdpa: query has {query.shape[-3]} heads and key {key.shape[-3]}; "
                         "pass enable_gqa=True for grouped-query attention")
    squeeze = query.dim() == 3
    if squeeze:
        query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
    out = attention(query, key, value, causal=is_causal, causal_alignment="top_left", scale=scale, layout="bhsd")
    return out.squeeze(0) if squeeze else out
