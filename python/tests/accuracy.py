"""The accuracy rule of every GPU comparison in these tests: the library's one definition
(evosdpa_output_tolerance and evosdpa_lse_tolerance in evosdpa.h, bound as _lib.output_tolerance and
_lib.lse_tolerance), applied to

  * the reference: float64 attention on the same dtype-valued inputs, and
  * the baseline: the plain fused computation in the dtype, rounded where a correct fused kernel rounds:
    scores S = Q·Kᵀ in float32, scaled and masked; the row max m; the unnormalised probabilities
    P = exp(S - m) in float32, then rounded to the dtype; l = the row sum of the float32 (unrounded) P;
    O = (P_rounded · V accumulated in float32) / l, rounded to the dtype once.

    max |O - O_f64| <= output_tolerance(dtype, max |O_baseline - O_f64|, max |O_f64|)

with NaN or infinity in O never passing; lse within lse_tolerance(max |lse_f64| over rows with a key), and
-inf exactly where the reference has -inf (rows that see no key).

FP8 inputs (float8_e4m3fn with descales): the reference runs on the real inputs (stored * descale), and
the baseline rounds where the FP8 kernels round: P = 2^(S - m + 8) in float32 (at most 256), l of that
unrounded P, P rounded to E4M3 for P·V, O rounded to the output dtype (the library's
attention_fused_baseline, src/host/cpu_reference.hpp).

Gradients (check_gradients) are judged by the same rule, each of dQ, dK, dV on its own:

    max |dX - dX_f64| <= output_tolerance(dtype, max |dX_baseline - dX_f64|, max |dX_f64|)

  * the reference: float64 autograd of softmax(scale·Q·Kᵀ + mask)·V on the upcast inputs, a row with no
    visible key giving O = 0 (and so dQ = 0);
  * the baseline: the plain fused backward in the dtype, reading O and lse as a correct forward stores
    them (the float64 ones rounded to the dtype and to float32): S = Q·Kᵀ in float32, scaled;
    P = exp(S - lse) in float32; Delta = rowsum(dO·O) in float32; dV = Pᵀ·dO with P rounded to the
    dtype; dP = dO·Vᵀ in float32; dS = P·(dP - Delta) in float32, rounded to the dtype for dQ = dS·K and
    dK = dSᵀ·Q, scaled in float32 after their float32 accumulation; each gradient rounded to the dtype
    once (the library's attention_backward_fused_baseline, src/host/backward_reference.hpp).

A query row that sees no key must get dQ exactly 0, and a key that no query sees dK = dV = 0.

Tensors are (..., H, L, E) with k/v heads repeated for grouped queries (dimension -3; their gradients
summed back over each group), or (L, E). The float32 sums are formed in float64 and rounded to float32
once: an exactly rounded float32 accumulation, with no TF32 whatever torch.backends says.
"""
import math
import struct

import torch

from evosdpa import _lib

DTYPE_CODES = {torch.float16: _lib.DTYPE_FLOAT16, torch.bfloat16: _lib.DTYPE_BFLOAT16}


def effective_scale(scale, head_dim):
    """The float32 softmax scale the kernel gets: scale, or 1/sqrt(head_dim) for None."""
    value = 1.0 / math.sqrt(head_dim) if scale is None else scale
    return struct.unpack("f", struct.pack("f", value))[0]


def visible_mask(lq, lk, causal, alignment, device):
    """[lq, lk] bool: which keys each query sees (top-left: j <= i; bottom-right: j <= i + lk - lq)."""
    i = torch.arange(lq, device=device)[:, None]
    j = torch.arange(lk, device=device)[None, :]
    if not causal:
        return torch.ones(lq, lk, dtype=torch.bool, device=device)
    return j <= i + (lk - lq if alignment == "bottom_right" else 0)


def _expand_heads(q, k, v):
    if q.dim() < 3 or q.shape[-3] == k.shape[-3]:
        return k, v
    group = q.shape[-3] // k.shape[-3]
    return k.repeat_interleave(group, -3), v.repeat_interleave(group, -3)


def _sum_groups(grad, like):
    """A gradient over the expanded heads (_expand_heads) summed back to like's heads."""
    if grad.dim() < 3 or grad.shape[-3] == like.shape[-3]:
        return grad
    h = like.shape[-3]
    return grad.reshape(*grad.shape[:-3], h, grad.shape[-3] // h, *grad.shape[-2:]).sum(dim=-3)


def _cap(s, softcap):
    """Scores after a softcap c > 0: c * tanh(s / c) (in s's precision); s itself for 0."""
    return softcap * torch.tanh(s / softcap) if softcap else s


def _visible(q, k, causal, alignment, mask):
    """The causal mask, and'ed with an extra boolean mask ([Lq, Lk] or broadcastable to the scores)."""
    visible = visible_mask(q.shape[-2], k.shape[-2], causal, alignment, q.device)
    return visible if mask is None else visible & mask


def _scores64(q, k, causal, alignment, scale, mask=None, softcap=0.0, bias=None):
    s = _cap((q.double() @ k.double().transpose(-1, -2)) * effective_scale(scale, q.shape[-1]), softcap)
    if bias is not None:
        s = s + bias.double()
    return s.masked_fill(~_visible(q, k, causal, alignment, mask), float("-inf"))


def reference(q, k, v, causal=False, alignment="top_left", scale=None, mask=None, softcap=0.0, bias=None):
    """float64 (O, lse). A row with no visible key gets O = 0 and lse = -inf. mask: an extra boolean mask
    (True: visible), softcap: c > 0 caps the scaled scores to c * tanh(s / c) before the masks; bias: an
    additive mask (or ALiBi's bias) broadcastable to the scores, added after the cap (-inf hides a key)."""
    k, v = _expand_heads(q, k, v)
    s = _scores64(q, k, causal, alignment, scale, mask, softcap, bias)
    lse = torch.logsumexp(s, dim=-1)
    # Normalised by the sum, not as exp(s - lse): a row whose scores are all near -3.4e38 (bf16's finfo.min
    # as a bias) has an lse that rounds away its log(number of keys), and exp(s - lse) would sum to that.
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return p @ v.double(), lse


def dequantize(x8, descale):
    """float32 real values of an FP8 tensor (..., H, L, E): stored * descale, descale () / (1,) or (B, Hkv)
    with query head h using K/V head h // (H // Hkv)."""
    x = x8.float()
    if descale.dim() == 2:
        d = descale.repeat_interleave(x.shape[-3] // descale.shape[1], dim=1)
        return x * d[:, :, None, None]
    return x * descale.reshape(())


def baseline(q, k, v, causal=False, alignment="top_left", scale=None, out_dtype=None, mask=None, softcap=0.0,
             bias=None):
    """The plain fused computation in q.dtype (see the module docstring): the error yardstick. With
    out_dtype (FP8 inputs), q, k, v are the real float32 inputs and P is rounded to E4M3."""
    fp8 = out_dtype is not None
    k, v = _expand_heads(q, k, v)
    out_shape = (*q.shape[:-1], v.shape[-1])
    if k.shape[-2] == 0:
        return torch.zeros(out_shape, dtype=q.dtype, device=q.device)
    # S in float32: the exact products of dtype values summed and rounded once, then scaled in float32.
    s = (q.double() @ k.double().transpose(-1, -2)).float() * effective_scale(scale, q.shape[-1])
    s = _cap(s.double(), softcap).float()  # the capped float32 score, rounded once
    if bias is not None:
        s = s + bias.float()
    s = s.masked_fill(~_visible(q, k, causal, alignment, mask), float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # no visible key: P = exp(-inf) = 0
    if fp8:
        p = torch.exp2((s - m) * math.log2(math.e) + 8.0)       # float32, at most 2^8
    else:
        p = torch.exp(s - m)                                      # float32
    l = p.sum(dim=-1, keepdim=True, dtype=torch.float64).float()  # of the unrounded P
    rounded = p.to(torch.float8_e4m3fn) if fp8 else p.to(q.dtype)
    pv = (rounded.double() @ v.double()).float()                  # P rounded, float32 accumulation
    o = torch.where(l > 0, pv / l, torch.zeros_like(pv))
    return o.to(out_dtype if fp8 else q.dtype)


def max_abs_error(got, want):
    """max |got - want| in float64; inf when got holds a NaN or an infinity; 0 for no elements."""
    if got.numel() == 0:
        return 0.0
    if not torch.isfinite(got).all():
        return math.inf
    return (got.double() - want).abs().max().item()


def check_attention(out, q, k, v, *, causal=False, alignment="top_left", scale=None, lse=None, rng=None, what="",
                    descales=None, mask=None, softcap=0.0, bias=None):
    """Assert that `out` (and `lse`, when given) meet the accuracy rule for attention of q, k, v.

    q, k, v, out: (..., H, L, E) (BHSD-ordered views) or (L, E); lse: (..., H, Lq) float32. `rng` (the
    test's Rng) puts the seed to replay the inputs in the failure message. descales: (q, k, v) descales
    of float8_e4m3fn inputs. mask: an extra boolean mask of visible keys ([Lq, Lk], or broadcastable to
    the scores), and'ed with the causal one; softcap: c > 0 caps the scaled scores (c * tanh(s / c));
    bias: an additive mask broadcastable to the scores. Returns (error, tolerance).
    """
    where = f"{what}: " if what else ""
    replay = f" [inputs from {rng!r}]" if rng is not None else ""
    code = _lib.DTYPE_FLOAT8_E4M3 if descales is not None else DTYPE_CODES[q.dtype]
    out_dtype = out.dtype if descales is not None else None
    if descales is not None:
        q, k, v = (dequantize(t, d) for t, d in zip((q, k, v), descales))
    ref_o, ref_lse = reference(q, k, v, causal, alignment, scale, mask, softcap, bias)
    want_dtype = out_dtype or q.dtype
    assert out.shape == ref_o.shape and out.dtype == want_dtype, (
        f"{where}O is {tuple(out.shape)} {out.dtype}, expected {tuple(ref_o.shape)} {want_dtype}{replay}")
    base_err = max_abs_error(baseline(q, k, v, causal, alignment, scale, out_dtype, mask, softcap, bias), ref_o)
    magnitude = ref_o.abs().max().item() if ref_o.numel() else 0.0
    tol = _lib.output_tolerance(code, base_err, magnitude)
    err = max_abs_error(out, ref_o)
    assert err <= tol, (f"{where}max |O - O_f64| = {err:.4g} > tolerance {tol:.4g} ({q.dtype}, baseline error "
                        f"{base_err:.4g}, max |O_f64| {magnitude:.4g}){replay}")
    if lse is not None:
        check_lse(lse, ref_lse, rng=rng, what=what, dtype=code)
    return err, tol


def check_lse(lse, ref_lse, rng=None, what="", dtype=_lib.DTYPE_FLOAT16):
    """lse float32 within lse_tolerance (for the inputs' dtype code) of the float64 one; -inf exactly where
    the reference is -inf."""
    where = f"{what}: " if what else ""
    replay = f" [inputs from {rng!r}]" if rng is not None else ""
    assert lse.shape == ref_lse.shape and lse.dtype == torch.float32, (
        f"{where}lse is {tuple(lse.shape)} {lse.dtype}, expected {tuple(ref_lse.shape)} torch.float32{replay}")
    has_key = torch.isfinite(ref_lse)
    assert not torch.isnan(lse).any() and not torch.isposinf(lse).any(), f"{where}lse has NaN or +inf{replay}"
    assert torch.equal(torch.isneginf(lse), ~has_key), (
        f"{where}lse is -inf on {int(torch.isneginf(lse).sum())} rows, the reference on "
        f"{int((~has_key).sum())} (rows with no visible key), and the rows differ{replay}")
    if has_key.any():
        magnitude = ref_lse[has_key].abs().max().item()
        err = (lse.double() - ref_lse)[has_key].abs().max().item()
    else:
        magnitude, err = 0.0, 0.0
    tol = _lib.lse_tolerance(magnitude, dtype)
    assert err <= tol, f"{where}max |lse - lse_f64| = {err:.4g} > tolerance {tol:.4g} (max |lse_f64| {magnitude:.4g}){replay}"


def reference_gradients(q, k, v, dout, causal=False, alignment="top_left", scale=None):
    """float64 (dq, dk, dv): autograd of softmax(scale q k^T + mask) v on the upcast inputs, for the
    gradient dout of O. A row with no visible key has O = 0, so its dq is 0."""
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ke, ve = _expand_heads(q64, k64, v64)
    s = (q64 @ ke.transpose(-1, -2)) * effective_scale(scale, q.shape[-1])
    mask = visible_mask(q.shape[-2], k.shape[-2], causal, alignment, q.device)
    has_key = mask.any(dim=-1, keepdim=True)
    # A row with no visible key gets finite scores (so no NaN reaches the gradients) and then P = 0.
    s = s.masked_fill(~mask, float("-inf")).masked_fill(~has_key, 0.0)
    p = torch.where(has_key, torch.softmax(s, dim=-1), 0.0)
    return torch.autograd.grad(p @ ve, (q64, k64, v64), dout.double())


def backward_baseline(q, k, v, dout, causal=False, alignment="top_left", scale=None):
    """The plain fused backward in q.dtype (see the module docstring): (dq, dk, dv), the error yardstick."""
    ref_o, ref_lse = reference(q, k, v, causal, alignment, scale)
    o, lse = ref_o.to(q.dtype), ref_lse.float()  # as a correct forward stores them
    ke, ve = _expand_heads(q, k, v)
    sc = effective_scale(scale, q.shape[-1])
    s = (q.double() @ ke.double().transpose(-1, -2)).float() * sc
    mask = visible_mask(q.shape[-2], k.shape[-2], causal, alignment, q.device)
    p = torch.where(mask, torch.exp(s - lse[..., None]), 0.0)  # float32; 0 where masked (and on keyless rows)
    delta = (dout.double() * o.double()).sum(dim=-1, keepdim=True).float()
    dp = (dout.double() @ ve.double().transpose(-1, -2)).float()
    ds = (p * (dp - delta)).to(q.dtype).double()
    dq = (ds @ ke.double()).float() * sc
    dk = _sum_groups(ds.transpose(-1, -2) @ q.double(), k).float() * sc
    dv = _sum_groups(p.to(q.dtype).double().transpose(-1, -2) @ dout.double(), v).float()
    return dq.to(q.dtype), dk.to(q.dtype), dv.to(q.dtype)


# A gradient that cancels to 0 (dQ and dK of a row that sees a single key: dP = Delta) has max |dX_f64| = 0,
# so the rule allows nothing there, while any kernel forming dP and Delta in two float32 sums of different
# orders leaves them ~1e-7 apart: each gradient may also be off by FP32_ROUNDINGS float32 roundings of its
# magnitude, the same sums with every term by its absolute value (the C++ check's kFp32Roundings).
FP32_ROUNDINGS = 16


def gradient_magnitudes(q, k, v, dout, causal=False, alignment="top_left", scale=None):
    """float64 (dq, dk, dv) with every term by its absolute value: dS = P (|dP| + |Delta|), |dS| |K|, ..."""
    ref_o, ref_lse = reference(q, k, v, causal, alignment, scale)
    ke, ve = _expand_heads(q, k, v)
    sc = effective_scale(scale, q.shape[-1])
    s = (q.double() @ ke.double().transpose(-1, -2)) * sc
    mask = visible_mask(q.shape[-2], k.shape[-2], causal, alignment, q.device)
    p = torch.where(mask, torch.exp(s - ref_lse.double()[..., None]), 0.0)
    delta = (dout.double() * ref_o.double()).sum(dim=-1, keepdim=True)
    ds = p * ((dout.double() @ ve.double().transpose(-1, -2)).abs() + delta.abs())
    dq = (ds @ ke.double().abs()) * abs(sc)
    dk = _sum_groups(ds.transpose(-1, -2) @ q.double().abs(), k) * abs(sc)
    dv = _sum_groups(p.transpose(-1, -2) @ dout.double().abs(), v)
    return dq, dk, dv


def check_gradients(grads, q, k, v, dout, *, causal=False, alignment="top_left", scale=None, rng=None, what=""):
    """Assert that grads = (dq, dk, dv) of attention of q, k, v for the gradient dout of O meet the accuracy
    rule (module docstring), with exact zeros where no key or no query is seen.

    All tensors (..., H, L, E) (BHSD-ordered views) or (L, E), in q's dtype. Returns {name: (error,
    tolerance)}."""
    where = f"{what}: " if what else ""
    replay = f" [inputs from {rng!r}]" if rng is not None else ""
    code = DTYPE_CODES[q.dtype]
    refs = reference_gradients(q, k, v, dout, causal, alignment, scale)
    bases = backward_baseline(q, k, v, dout, causal, alignment, scale)
    mags = gradient_magnitudes(q, k, v, dout, causal, alignment, scale)
    mask = visible_mask(q.shape[-2], k.shape[-2], causal, alignment, q.device)
    must_be_zero = {"dq": ~mask.any(dim=1), "dk": ~mask.any(dim=0), "dv": ~mask.any(dim=0)}  # per row of each
    result = {}
    for name, got, ref, base, mag in zip(("dq", "dk", "dv"), grads, refs, bases, mags):
        assert got.shape == ref.shape and got.dtype == q.dtype, (
            f"{where}{name} is {tuple(got.shape)} {got.dtype}, expected {tuple(ref.shape)} {q.dtype}{replay}")
        zero_rows = got[..., must_be_zero[name], :]
        assert not zero_rows.ne(0).any(), (
            f"{where}{name} is not exactly 0 on the {int(must_be_zero[name].sum())} rows that "
            f"{'see no key' if name == 'dq' else 'no query sees'}{replay}")
        base_err = max_abs_error(base, ref)
        magnitude = ref.abs().max().item() if ref.numel() else 0.0
        floor = FP32_ROUNDINGS * 2.0 ** -24 * (mag.abs().max().item() if mag.numel() else 0.0)
        tol = max(_lib.output_tolerance(code, base_err, magnitude), floor)
        err = max_abs_error(got, ref)
        assert err <= tol, (f"{where}max |{name} - {name}_f64| = {err:.4g} > tolerance {tol:.4g} ({q.dtype}, "
                            f"baseline error {base_err:.4g}, max |{name}_f64| {magnitude:.4g}){replay}")
        result[name] = (err, tol)
    return result
