"""Mask tensors (C ABI 0.8): attn_mask of evosdpa.attention and of the SDPA drop-in.

On a GPU, against float64 attention (accuracy.py) with the masks built here: boolean (True: the query sees
the key) and additive (added to the scaled scores, -inf hides a key), full [B, Hq, Lq, Lk] and broadcast
([B, 1, Lq, Lk], [Lq, Lk], a key padding mask [B, 1, 1, Lk]), with each causal alignment and none, rows
and a whole batch entry that see no key (exactly 0, lse -inf), grouped heads, BSHD, odd lengths, on every
kernel that has them; that the rule rejects a mask read one key over; PyTorch's own SDPA on the same
call (transformers' finfo.min padding mask included); the SDPA drop-in's broadcasting over 2-D to 5-D
inputs; torch.compile, opcheck; the errors; the gradient's NotImplementedError."""
import math

import pytest

from conftest import HAVE_TORCH, needs_gpu, needs_torch, skip_unless_runs

if HAVE_TORCH:
    import torch
    import torch.nn.functional as F

    from accuracy import check_attention

import evosdpa
from evosdpa import _lib

pytestmark = needs_torch

KERNELS = ["auto", "wgmma_sm90", "mma_sm80", "reference"]


def runs_here(kernel):
    skip_unless_runs(kernel, "a mask tensor", attn_mask=torch.ones(128, 128, dtype=torch.bool, device="cuda"))


def make_mask(shape, kind, dtype, rng, lq):
    """(attn_mask, visible, bias) of `shape`: a quarter of the keys hidden at random and every key of the
    query rows i % 53 == 11 (or, for a key mask [B, 1, 1, Lk], of batch entry 1). visible: bool; bias:
    None for a bool mask, else the additive mask itself (dtype values, -inf where hidden)."""
    u = torch.rand(shape, generator=rng.generator, device=rng.device)
    hidden = u < 0.25
    if shape[-2] == lq and lq > 11:
        hidden[..., 11::53, :] = True
    elif len(shape) == 4 and shape[0] > 1 and shape[-2] == 1:
        hidden[1] = True
    if kind == "bool":
        return ~hidden, ~hidden, None
    bias = rng.randn(*shape, dtype=dtype, std=2.0).masked_fill(hidden, float("-inf"))
    return bias, None, bias


# (B, Hq, Hkv, Lq, Lk, D, causal, alignment, kind, mask shape (None: [B, Hq, Lq, Lk]), layout)
CASES = [
    (2, 4, 2, 333, 517, 64, False, "top_left", "bool", None, "bhsd"),          # full, GQA, odd Lk
    (2, 4, 4, 300, 300, 128, True, "top_left", "additive", (2, 1, 300, 300), "bhsd"),
    (1, 2, 2, 200, 700, 64, True, "bottom_right", "additive", (200, 700), "bshd"),
    (1, 2, 2, 700, 300, 128, True, "bottom_right", "bool", (1, 2, 700, 300), "bhsd"),  # rows with no key
    (3, 2, 2, 257, 1000, 64, False, "top_left", "bool", (3, 1, 1, 1000), "bhsd"),  # key padding
    (3, 8, 2, 1, 999, 128, False, "top_left", "additive", (3, 1, 1, 999), "bshd"),  # decode-like, odd Lk
    (4, 16, 16, 1100, 1100, 128, True, "top_left", "additive", (4, 1, 1100, 1100), "bhsd"),  # many items
]


@needs_gpu
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16] if HAVE_TORCH else [])
@pytest.mark.parametrize("kernel", KERNELS)
def test_matches_float64(kernel, dtype, case, rng):
    runs_here(kernel)
    b, hq, hkv, lq, lk, d, causal, alignment, kind, shape, layout = case
    q = rng.randn(b, hq, lq, d, dtype=dtype)
    k, v = rng.randn(b, hkv, lk, d, dtype=dtype), rng.randn(b, hkv, lk, d, dtype=dtype)
    mask, visible, bias = make_mask(shape or (b, hq, lq, lk), kind, dtype, rng, lq)
    args = (q, k, v) if layout == "bhsd" else tuple(t.transpose(1, 2).contiguous() for t in (q, k, v))
    out, lse = evosdpa.attention(*args, causal=causal, causal_alignment=alignment, attn_mask=mask, layout=layout,
                                 return_lse=True, kernel=kernel)
    out = out if layout == "bhsd" else out.transpose(1, 2)
    what = f"{kernel} {dtype} {case}"
    check_attention(out, q, k, v, causal=causal, alignment=alignment, lse=lse, rng=rng, what=what, mask=visible,
                    bias=bias)
    from accuracy import reference
    _, ref_lse = reference(q, k, v, causal, alignment, None, visible, 0.0, bias)
    assert not out[torch.isneginf(ref_lse)].ne(0).any(), f"{what}: O is not exactly 0 on the rows that see no key"


@needs_gpu
@pytest.mark.parametrize("scale, softcap", [(None, 0.0), (1.0, 0.0), (-0.3, 0.0), (None, 30.0)])
@pytest.mark.parametrize("kernel", KERNELS)
def test_biases_past_float_range_never_give_nan(kernel, scale, softcap, rng):
    """bf16 holds biases far past what a float32 softmax tells apart (evosdpa.h, the "known limit"). A row
    whose huge biases cover only its first tiles (a padded prefix at -1e10 and the like, common mask
    values) matches float64 like any other row: on wgmma_sm90 the folded exponent gave P = inf on those
    tiles and a NaN row once later keys moved its max. A row of nothing but such biases may read as a row
    that sees no key (O = 0, lse = -inf), or average V, never NaN."""
    runs_here(kernel)
    dtype, lq, lk = torch.bfloat16, 96, 700
    q, k, v = (rng.randn(1, 2, n, 64, dtype=dtype) for n in (lq, lk, lk))
    bias = rng.randn(1, 1, lq, lk, dtype=dtype, std=2.0)
    lowest = torch.finfo(dtype).min
    bias[..., 7, ::3] = lowest        # a third of the keys at finfo.min
    bias[..., 9, :] = lowest          # all keys but one
    bias[..., 9, 123] = 1.0
    bias[..., 11, :] = float("-inf")  # every key hidden: O = 0, lse = -inf
    bias[..., 19, 200:] = -1e30       # ordinary keys first, then huge ones
    for i in range(16):               # padded prefixes over two and a half 128-key tiles, 16 magnitudes
        bias[..., 20 + i, :300] = -(10.0 ** (10 + i))
    huge = [5, 13, 17]                # rows of nothing else: out of range (evosdpa.h)
    for row, value in zip(huge, (lowest, -1e20, -1e10)):
        bias[..., row, :] = value
    out, lse = evosdpa.attention(q, k, v, attn_mask=bias, scale=scale, softcap=softcap, return_lse=True,
                                 kernel=kernel)
    what = f"{kernel} scale {scale} softcap {softcap}"
    ordinary = torch.ones(lq, dtype=torch.bool, device=q.device)
    ordinary[huge] = False
    check_attention(out[..., ordinary, :], q[..., ordinary, :], k, v, scale=scale, softcap=softcap,
                    lse=lse[..., ordinary], bias=bias[..., ordinary, :], rng=rng, what=what)
    rows, row_lse = out[..., huge, :].float(), lse[..., huge]
    # O = 0 or an average of V's rows; lse = -inf or far below every other, never NaN.
    assert torch.isfinite(rows).all() and rows.abs().max() <= v.float().abs().max() * 1.01, f"{what}: {rows}"
    assert (torch.isneginf(row_lse) | (row_lse < -5e8)).all(), f"{what}: lse {row_lse}"
    assert not out[..., 11, :].ne(0).any(), f"{what}: O is not exactly 0 on the row whose keys are all hidden"


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
def test_rule_rejects_a_mask_read_one_key_over(kernel, rng):
    runs_here(kernel)
    q, k, v = (rng.randn(1, 2, 300, 64, dtype=torch.float16) for _ in range(3))
    bias = rng.randn(1, 1, 300, 300, dtype=torch.float16, std=2.0)
    out = evosdpa.attention(q, k, v, attn_mask=bias, kernel=kernel)
    check_attention(out, q, k, v, bias=bias)
    shifted = torch.cat([bias[..., 1:], bias[..., -2:-1]], dim=-1)
    with pytest.raises(AssertionError):
        check_attention(out, q, k, v, bias=shifted)


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16] if HAVE_TORCH else [])
def test_same_as_pytorch_sdpa(dtype, rng):
    """The drop-in against torch.nn.functional.scaled_dot_product_attention on the same call, where no row is
    fully masked (PyTorch's backends disagree among themselves there): a bool mask, an additive float mask,
    and transformers' padding mask (finfo.min where padded, a causal part), over 3-D and 5-D inputs too."""
    b, h, lq, lk, d = 2, 4, 190, 190, 64
    q, k, v = (rng.randn(b, h, lq, d, dtype=dtype) for _ in range(3))
    keep = torch.rand(lq, lk, generator=rng.generator, device=q.device) > 0.2
    keep[:, 0] = True
    pad = torch.ones(b, lk, dtype=torch.bool, device=q.device)
    pad[1, :37] = False  # left padding of the second sequence
    causal = torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril()
    hf = torch.zeros(b, 1, lq, lk, dtype=dtype, device=q.device).masked_fill(
        ~(pad[:, None, None, :] & causal), torch.finfo(dtype).min)
    hf[1, :, :37] = 0.0  # transformers un-masks the padded queries' rows (their output is discarded)
    masks = [keep, rng.randn(1, h, lq, lk, dtype=dtype), hf]
    for mask in masks:
        want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask
                                              if mask.dtype == torch.bool else mask.double())
        got = evosdpa.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        torch_out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        err, torch_err = (got.double() - want).abs().max().item(), (torch_out.double() - want).abs().max().item()
        assert err <= 2 * torch_err + 1e-3, f"{dtype} {tuple(mask.shape)}: evosdpa {err:.3g}, torch {torch_err:.3g}"
    # 3-D (H, L, E) with a 2-D mask, and 5-D (B1, B2, H, L, E) with a mask over the heads.
    got = evosdpa.scaled_dot_product_attention(q[0], k[0], v[0], attn_mask=keep)
    check_attention(got, q[0], k[0], v[0], mask=keep)
    q5, k5, v5 = (t.reshape(1, b, h, lq, d) for t in (q, k, v))
    m5 = masks[1].reshape(1, 1, h, lq, lk)
    got = evosdpa.scaled_dot_product_attention(q5, k5, v5, attn_mask=m5)
    check_attention(got, q5, k5, v5, bias=m5)


@needs_gpu
def test_an_expanded_mask_is_not_copied_whole(rng):
    # transformers' 4-D masks are often expand()ed views of [B, 1, 1, Lk] key padding. Lk = 1000 (not a multiple
    # of 16) makes the call pad the mask's rows: a copy of its own rows, not of the B * H * Lq broadcast ones
    # (here 16.5 MB for the full mask), and the same output as the unexpanded mask.
    b, h, lq, lk = 2, 8, 1024, 1000
    q = rng.randn(b, h, lq, 64, dtype=torch.float16)
    k, v = rng.randn(b, h, lk, 64, dtype=torch.float16), rng.randn(b, h, lk, 64, dtype=torch.float16)
    keep = torch.rand(b, 1, 1, lk, generator=rng.generator, device=q.device) > 0.3
    keep[..., 0] = True
    want = evosdpa.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    for mask in (keep.expand(b, h, lq, lk), keep.float().log().half().expand(b, h, lq, lk)):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        got = evosdpa.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        extra = torch.cuda.max_memory_allocated() - before - got.numel() * got.element_size()
        assert extra < 1 << 20, f"{mask.dtype}: {extra} bytes besides O"
        assert torch.equal(got, want), mask.dtype


@needs_gpu
def test_float32_bias_is_rounded_to_the_inputs_dtype(rng):
    q, k, v = (rng.randn(1, 2, 100, 64, dtype=torch.bfloat16) for _ in range(3))
    bias = torch.randn(100, 100, generator=rng.generator, device=q.device) * 3
    out = evosdpa.attention(q, k, v, attn_mask=bias)
    check_attention(out, q, k, v, bias=bias.to(torch.bfloat16))


@needs_gpu
def test_a_strided_mask_is_read_through_its_strides(rng):
    """A transposed (key dimension strided), an expanded and an odd-row-stride mask give the answer of their
    contiguous copies (on Hopper named wgmma_sm90: the binding's padded copy keeps it there)."""
    q, k, v = (rng.randn(2, 2, 160, 128, dtype=torch.float16) for _ in range(3))
    base = rng.randn(2, 1, 160, 160, dtype=torch.float16, std=2.0)
    odd_rows = base.reshape(-1)[:2 * 160 * 159].reshape(2, 1, 160, 159)  # rows 159 elements apart: copied, padded
    for mask in (base.transpose(-1, -2), base.expand(2, 2, 160, 160), base[:, :, :, :159].expand(2, 2, 160, 159),
                 odd_rows):
        kk, vv = k[:, :, :mask.shape[-1]], v[:, :, :mask.shape[-1]]
        got = evosdpa.attention(q, kk, vv, attn_mask=mask, kernel="wgmma_sm90" if _is_hopper() else None)
        assert torch.equal(got, evosdpa.attention(q, kk, vv, attn_mask=mask.contiguous()))
        check_attention(got, q, kk, vv, bias=mask)


def _is_hopper():
    return torch.cuda.get_device_capability()[0] == 9


@needs_gpu
def test_errors(rng):
    q = rng.randn(1, 2, 64, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="does not broadcast"):
        evosdpa.attention(q, q, q, attn_mask=torch.ones(1, 3, 64, 64, dtype=torch.bool, device=q.device))
    with pytest.raises(ValueError, match="5 dimensions"):
        evosdpa.attention(q, q, q, attn_mask=torch.ones(1, 1, 2, 64, 64, dtype=torch.bool, device=q.device))
    with pytest.raises(TypeError, match="torch.bool or the inputs' dtype"):
        evosdpa.attention(q, q, q, attn_mask=torch.ones(64, 64, dtype=torch.int32, device=q.device))
    with pytest.raises(TypeError, match="attn_mask must be a torch.Tensor or None, got list"):
        evosdpa.attention(q, q, q, attn_mask=[[True] * 64] * 64)
    with pytest.raises(ValueError, match="attn_mask is on cpu"):
        evosdpa.attention(q, q, q, attn_mask=torch.ones(64, 64, dtype=torch.bool))
    with pytest.raises(ValueError, match="is_causal"):
        evosdpa.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(64, 64, dtype=torch.bool,
                                                                              device=q.device), is_causal=True)
    for kernel in ("splitkv_sm80",):
        with pytest.raises(ValueError, match="mask"):
            evosdpa.attention(q, q, q, kernel=kernel, attn_mask=torch.ones(64, 64, dtype=torch.bool, device=q.device))


@needs_gpu
def test_no_backward_pass(rng):
    q = rng.randn(1, 2, 64, 64, dtype=torch.float16).requires_grad_()
    out = evosdpa.attention(q, q.detach(), q.detach(), attn_mask=torch.ones(64, 64, dtype=torch.bool,
                                                                            device=q.device))
    with pytest.raises(NotImplementedError, match="attn_mask"):
        out.sum().backward()


@needs_gpu
def test_torch_compile_and_opcheck(rng):
    q, k, v = (rng.randn(2, 4, 200, 64, dtype=torch.float16) for _ in range(3))
    mask = rng.randn(2, 1, 200, 200, dtype=torch.float16)

    def f(q, k, v, mask):
        return evosdpa.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    compiled = torch.compile(f, fullgraph=True)
    assert torch.equal(compiled(q, k, v, mask), f(q, k, v, mask))
    op = torch.ops.evosdpa.attention_fwd.default
    torch.library.opcheck(op, (q, k, v, _lib.CAUSAL_NONE, math.nan, True, "bhsd", "auto", None, None, None,
                               None, True, -1, -1, 0.0, mask > 0))
