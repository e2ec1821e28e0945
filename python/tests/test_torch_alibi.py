"""ALiBi (C ABI 0.9): alibi_slopes of evosdpa.attention, attention_varlen and attention_with_kvcache.

On a GPU, against float64 attention (accuracy.py) with the bias of FlashAttention's documented formula,
-slope * |i + Lk - Lq - j| added to the scaled score of query i and key j (the diagonal at i instead for a
top-left causal mask), built here from arange: BLOOM's slopes 2^(-8(h+1)/H) and random ones, a negative
slope, (Hq,) and (B, Hq) slopes (expanded from one row, and with a strided head dimension), each causal
alignment and none, Lq < Lk and Lq > Lk (rows with no key: exactly 0, lse -inf), odd lengths, grouped
heads, BSHD, D 64 and 128, fp16 and bf16, on every kernel that has it; the lse against float64 logsumexp of
the biased scores; the same formula over PyTorch's float64 SDPA; that the rule rejects slopes shifted by
one head and a distance off by one; ALiBi with a window and softcap (the reference kernel), a mask, scale 0;
packed sequences (lengths 0 and 1) and a KV cache, dense and paged; torch.compile, opcheck; the gradient's
NotImplementedError.

Without a GPU (PyTorch only): the argument checks, under FakeTensorMode, and the ops' schemas."""
import contextlib
import math

import pytest

from conftest import HAVE_TORCH, needs_gpu, needs_torch, skip_unless_runs

if HAVE_TORCH:
    import torch
    import torch.nn.functional as F

    from accuracy import baseline, check_attention, check_lse, effective_scale, max_abs_error, visible_mask

import evosdpa
from evosdpa import _lib

pytestmark = needs_torch

KERNELS = ["auto", "wgmma_sm90", "mma_sm80", "reference"]


def runs_here(kernel):
    skip_unless_runs(kernel, "ALiBi", alibi_slopes=torch.full((2,), 0.5, device="cuda"))


def diagonal_offset(lq, lk, causal, alignment):
    """Where query i's diagonal key is, less i: FlashAttention's Lk - Lq, or 0 under a top-left causal mask."""
    return 0 if causal and alignment == "top_left" else lk - lq


def alibi_bias(slopes, lq, lk, offset):
    """float64 -slope * |i + offset - j|, FlashAttention's alibi_slopes bias written from its documentation:
    [Hq, Lq, Lk] for slopes (Hq,), [B, Hq, Lq, Lk] for slopes (B, Hq)."""
    i = torch.arange(lq, dtype=torch.float64, device=slopes.device)[:, None]
    j = torch.arange(lk, dtype=torch.float64, device=slopes.device)[None, :]
    return -slopes.double()[..., None, None] * (i + offset - j).abs()


def bloom_slopes(heads, device="cuda"):
    """BLOOM's (and the ALiBi paper's) slopes for a power-of-2 head count: 2^(-8(h+1)/H) for head h."""
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)], dtype=torch.float32, device=device)


def make_slopes(kind, b, hq, rng):
    """"bloom": (Hq,); "random": (B, Hq) in [0.01, 1); "negative": those with head 0's slope -0.05 (a bias
    that grows with the distance); "expanded": (1, Hq) expanded to (B, Hq), batch stride 0; "strided": (B, Hq)
    with head stride 2 (the binding copies it)."""
    if kind == "bloom":
        return bloom_slopes(hq)
    if kind == "expanded":
        return bloom_slopes(hq)[None].expand(b, hq)
    slopes = torch.rand(b, hq, generator=rng.generator, device=rng.device) * 0.99 + 0.01
    if kind == "strided":
        return torch.stack([slopes, slopes], dim=-1)[..., 0]
    if kind == "negative":
        slopes[:, 0] = -0.05
    return slopes


# (B, Hq, Hkv, Lq, Lk, D, causal, alignment, slopes, layout)
CASES = [
    (2, 8, 2, 333, 517, 64, False, "top_left", "bloom", "bhsd"),         # GQA, odd lengths, (Hq,)
    (2, 8, 8, 300, 300, 128, True, "top_left", "random", "bhsd"),        # (B, Hq)
    (1, 4, 4, 37, 300, 64, True, "bottom_right", "bloom", "bshd"),       # Lq < Lk
    (1, 4, 4, 300, 37, 128, True, "bottom_right", "random", "bhsd"),     # Lq > Lk: rows with no key
    (2, 4, 2, 37, 300, 128, False, "top_left", "negative", "bhsd"),      # no causal mask: diagonal bottom-right
    (3, 8, 2, 300, 37, 64, False, "top_left", "expanded", "bshd"),       # batch stride 0
    (1, 4, 2, 200, 700, 64, True, "top_left", "strided", "bhsd"),        # top-left, Lq < Lk: the diagonal at i
    (1, 4, 4, 700, 200, 128, True, "top_left", "negative", "bhsd"),      # top-left, Lq > Lk
    (2, 8, 2, 1, 999, 128, False, "top_left", "bloom", "bshd"),          # decode-like
    (4, 16, 8, 1100, 1100, 64, True, "bottom_right", "random", "bhsd"),  # many work items
]


@needs_gpu
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16] if HAVE_TORCH else [])
@pytest.mark.parametrize("kernel", KERNELS)
def test_matches_float64(kernel, dtype, case, rng):
    runs_here(kernel)
    b, hq, hkv, lq, lk, d, causal, alignment, kind, layout = case
    q = rng.randn(b, hq, lq, d, dtype=dtype)
    k, v = rng.randn(b, hkv, lk, d, dtype=dtype), rng.randn(b, hkv, lk, d, dtype=dtype)
    slopes = make_slopes(kind, b, hq, rng)
    args = (q, k, v) if layout == "bhsd" else tuple(t.transpose(1, 2).contiguous() for t in (q, k, v))
    out, lse = evosdpa.attention(*args, causal=causal, causal_alignment=alignment, alibi_slopes=slopes,
                                 layout=layout, return_lse=True, kernel=kernel)
    out = out if layout == "bhsd" else out.transpose(1, 2)
    what = f"{kernel} {dtype} {case}"
    bias = alibi_bias(slopes, lq, lk, diagonal_offset(lq, lk, causal, alignment))
    check_attention(out, q, k, v, causal=causal, alignment=alignment, lse=lse, rng=rng, what=what, bias=bias)
    no_key = ~visible_mask(lq, lk, causal, alignment, q.device).any(dim=1)
    assert not out[:, :, no_key].ne(0).any(), f"{what}: O is not exactly 0 on the rows that see no key"


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16] if HAVE_TORCH else [])
def test_flash_attention_formula_over_pytorch_sdpa(dtype, rng):
    """FlashAttention's documented ALiBi (causal bottom-right, as FlashAttention's causal mask) written out
    over PyTorch's float64 SDPA, a reference apart from accuracy.py's: O within the accuracy rule's
    tolerance of it, lse within lse_tolerance of float64 logsumexp of the biased, masked scores."""
    b, hq, hkv, lq, lk, d = 2, 8, 2, 200, 517, 128
    q = rng.randn(b, hq, lq, d, dtype=dtype)
    k, v = rng.randn(b, hkv, lk, d, dtype=dtype), rng.randn(b, hkv, lk, d, dtype=dtype)
    slopes = make_slopes("random", b, hq, rng)
    i, j = torch.arange(lq, device=q.device)[:, None], torch.arange(lk, device=q.device)[None, :]
    bias = -slopes.double()[:, :, None, None] * (i + lk - lq - j).abs()
    biased_mask = bias.masked_fill(j > i + lk - lq, float("-inf"))
    q64, k64, v64 = q.double(), k.double().repeat_interleave(hq // hkv, 1), v.double().repeat_interleave(hq // hkv, 1)
    scale = effective_scale(None, d)
    want = F.scaled_dot_product_attention(q64, k64, v64, attn_mask=biased_mask, scale=scale)
    want_lse = torch.logsumexp(q64 @ k64.transpose(-1, -2) * scale + biased_mask, dim=-1)
    out, lse = evosdpa.attention(q, k, v, causal=True, causal_alignment="bottom_right", alibi_slopes=slopes,
                                 return_lse=True)
    base_err = max_abs_error(baseline(q, k, v, True, "bottom_right", bias=bias), want)
    tol = _lib.output_tolerance(_lib.DTYPE_FLOAT16 if dtype == torch.float16 else _lib.DTYPE_BFLOAT16, base_err,
                                want.abs().max().item())
    err = max_abs_error(out, want)
    assert err <= tol, f"{dtype}: max |O - O_f64| = {err:.4g} > tolerance {tol:.4g} [inputs from {rng!r}]"
    check_lse(lse, want_lse, rng=rng, what=f"{dtype} lse")


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
def test_rule_rejects_wrong_slopes_and_distances(kernel, rng):
    """The comparison can fail: the result for BLOOM's slopes fails when judged with them shifted by one head
    or with the distance off by one; under a causal mask a diagonal one key off shifts each row's seen
    scores by a constant (the same O), and the lse tells it."""
    runs_here(kernel)
    q, k, v = (rng.randn(1, 8, 300, 64, dtype=torch.float16) for _ in range(3))
    slopes = bloom_slopes(8)
    out, lse = evosdpa.attention(q, k, v, alibi_slopes=slopes, return_lse=True, kernel=kernel)
    check_attention(out, q, k, v, lse=lse, bias=alibi_bias(slopes, 300, 300, 0))
    with pytest.raises(AssertionError):
        check_attention(out, q, k, v, bias=alibi_bias(slopes.roll(1), 300, 300, 0))
    with pytest.raises(AssertionError):
        check_attention(out, q, k, v, bias=alibi_bias(slopes, 300, 300, 1))
    out, lse = evosdpa.attention(q, k, v, causal=True, alibi_slopes=slopes, return_lse=True, kernel=kernel)
    check_attention(out, q, k, v, causal=True, lse=lse, bias=alibi_bias(slopes, 300, 300, 0))
    check_attention(out, q, k, v, causal=True, bias=alibi_bias(slopes, 300, 300, 1))
    with pytest.raises(AssertionError, match="lse"):
        check_attention(out, q, k, v, causal=True, lse=lse, bias=alibi_bias(slopes, 300, 300, 1))


@needs_gpu
def test_with_the_other_score_mods_and_scale_zero(rng):
    """ALiBi with a sliding window and a softcap (the reference kernel under "auto"), with an additive mask
    (wgmma_sm90 on Hopper, mma_sm80 elsewhere), and with softmax scale 0 (the bias alone decides; mma_sm80)."""
    b, hq, lq, lk, d = 2, 4, 257, 300, 64
    q = rng.randn(b, hq, lq, d, dtype=torch.bfloat16, std=4.0)
    k, v = rng.randn(b, hq, lk, d, dtype=torch.bfloat16, std=4.0), rng.randn(b, hq, lk, d, dtype=torch.bfloat16)
    slopes = make_slopes("random", b, hq, rng)
    bias = alibi_bias(slopes, lq, lk, lk - lq)
    out = evosdpa.attention(q, k, v, alibi_slopes=slopes, window_size=(40, 3), softcap=20.0)
    i, j = torch.arange(lq, device=q.device)[:, None], torch.arange(lk, device=q.device)[None, :]
    window = (j >= i + lk - lq - 40) & (j <= i + lk - lq + 3)
    check_attention(out, q, k, v, mask=window, softcap=20.0, bias=bias, rng=rng, what="window and softcap")
    mask = rng.randn(b, 1, lq, lk, dtype=torch.bfloat16)
    out = evosdpa.attention(q, k, v, alibi_slopes=slopes, attn_mask=mask)
    check_attention(out, q, k, v, bias=bias + mask.double(), rng=rng, what="attn_mask")
    out = evosdpa.attention(q, k, v, alibi_slopes=slopes, scale=0.0)
    check_attention(out, q, k, v, scale=0.0, bias=bias, rng=rng, what="scale 0")


@needs_gpu
def test_varlen_per_sequence(rng):
    """Packed sequences, lengths 0 and 1 among them (no queries; no keys: O 0, lse -inf), the diagonal
    bottom-right per sequence (top-left through the op), (B, Hq) and (Hq,) slopes."""
    lengths_q, lengths_k = [0, 1, 77, 300, 37, 5], [5, 1, 90, 37, 300, 0]
    hq, hkv, d = 8, 2, 64
    q = rng.randn(sum(lengths_q), hq, d, dtype=torch.float16)
    k = rng.randn(sum(lengths_k), hkv, d, dtype=torch.float16)
    v = rng.randn(sum(lengths_k), hkv, d, dtype=torch.float16)
    cu = [torch.tensor([0] + [sum(ls[:i + 1]) for i in range(len(ls))], dtype=torch.int32, device=q.device)
          for ls in (lengths_q, lengths_k)]
    for kernel in KERNELS:
        runs_here(kernel)
        for slopes in (make_slopes("random", len(lengths_q), hq, rng), bloom_slopes(hq)):
            for causal, alignment in ((False, "bottom_right"), (True, "bottom_right"), (True, "top_left")):
                what = f"varlen {kernel} {tuple(slopes.shape)} causal {causal} {alignment}"
                if alignment == "bottom_right":
                    out, lse = evosdpa.attention_varlen(q, k, v, cu[0], cu[1], max(lengths_q), max(lengths_k),
                                                        causal=causal, alibi_slopes=slopes, return_softmax_lse=True,
                                                        kernel=kernel)
                else:
                    out, lse = torch.ops.evosdpa.attention_varlen(q, k, v, cu[0], cu[1], None, max(lengths_q),
                                                                  max(lengths_k), _lib.CAUSAL_TOP_LEFT, math.nan,
                                                                  True, kernel, -1, -1, 0.0, slopes)
                qs = ks = 0
                for s, (lq, lk) in enumerate(zip(lengths_q, lengths_k)):
                    if lq:
                        rows, keys = slice(qs, qs + lq), slice(ks, ks + lk)
                        bias = alibi_bias(slopes[s] if slopes.dim() == 2 else slopes, lq, lk,
                                          diagonal_offset(lq, lk, causal, alignment))
                        check_attention(out[rows].transpose(0, 1), q[rows].transpose(0, 1), k[keys].transpose(0, 1),
                                        v[keys].transpose(0, 1), causal=causal, alignment=alignment,
                                        lse=lse[:, rows], bias=bias, rng=rng, what=f"{what} sequence {s} ({lq}, {lk})")
                    qs, ks = qs + lq, ks + lk


@needs_gpu
@pytest.mark.parametrize("paged", [False, True])
def test_kvcache_per_sequence(paged, rng):
    """New queries against a cache, each sequence's diagonal at its own length: dense ("auto": the split-KV
    decode kernel has no ALiBi), and paged (shuffled 16-key pages, the reference kernel)."""
    b, hq, hkv, d, lq, capacity, page = 4, 8, 2, 128, 4, 1024, 16
    q = rng.randn(b, lq, hq, d, dtype=torch.bfloat16)
    kc, vc = (rng.randn(b, capacity, hkv, d, dtype=torch.bfloat16) for _ in range(2))
    lens = [1024, 333, 3, 0]
    seqlens = torch.tensor(lens, dtype=torch.int32, device=q.device)
    slopes = make_slopes("random", b, hq, rng)
    table = None
    k_arg, v_arg = kc, vc
    if paged:  # page x of the paged cache is page perm[x] of the dense one, so the table holds perm's inverse
        perm = torch.randperm(b * capacity // page, generator=rng.generator, device=q.device)
        k_arg, v_arg = (t.reshape(-1, page, hkv, d)[perm] for t in (kc, vc))
        table = torch.empty_like(perm)
        table[perm] = torch.arange(perm.numel(), device=q.device)
        table = table.reshape(b, -1).to(torch.int32)
    for causal in (False, True):
        out, lse = evosdpa.attention_with_kvcache(q, k_arg, v_arg, seqlens, block_table=table, causal=causal,
                                                  return_softmax_lse=True, alibi_slopes=slopes,
                                                  kernel="reference" if paged else None)
        for s, n in enumerate(lens):
            check_attention(out[s].transpose(0, 1), q[s].transpose(0, 1), kc[s, :n].transpose(0, 1),
                            vc[s, :n].transpose(0, 1), causal=causal, alignment="bottom_right", lse=lse[s],
                            bias=alibi_bias(slopes[s], lq, n, n - lq), rng=rng,
                            what=f"kvcache paged {paged} causal {causal} sequence {s} of length {n}")


@needs_gpu
def test_kernels_without_it_refuse(rng):
    q = rng.randn(1, 2, 200, 64, dtype=torch.float16)
    slopes = bloom_slopes(2)
    with pytest.raises(ValueError, match="ALiBi"):
        evosdpa.attention(q, q, q, kernel="splitkv_sm80", alibi_slopes=slopes)
    # mma_sm80 and wgmma_sm90 have it alone or with a mask tensor: with a softcap, the reference kernel.
    kernels = ["mma_sm80"] + (["wgmma_sm90"] if torch.cuda.get_device_capability()[0] == 9 else [])
    for kernel in kernels:
        with pytest.raises(ValueError, match="ALiBi with a sliding window"):
            evosdpa.attention(q, q, q, kernel=kernel, alibi_slopes=slopes, softcap=30.0)


@needs_gpu
def test_no_backward_pass(rng):
    q = rng.randn(1, 2, 64, 64, dtype=torch.float16).requires_grad_()
    out = evosdpa.attention(q, q.detach(), q.detach(), alibi_slopes=bloom_slopes(2))
    with pytest.raises(NotImplementedError, match="alibi_slopes"):
        out.sum().backward()


@needs_gpu
def test_torch_compile_and_opcheck(rng):
    q, k, v = (rng.randn(2, 4, 200, 64, dtype=torch.float16) for _ in range(3))
    slopes = make_slopes("random", 2, 4, rng)

    def f(q, k, v, slopes):
        return evosdpa.attention(q, k, v, causal=True, alibi_slopes=slopes)

    compiled = torch.compile(f, fullgraph=True)
    assert torch.equal(compiled(q, k, v, slopes), f(q, k, v, slopes))
    torch.library.opcheck(torch.ops.evosdpa.attention_fwd.default,
                          (q, k, v, _lib.CAUSAL_BOTTOM_RIGHT, math.nan, True, "bhsd", "auto", None, None, None, None,
                           True, -1, -1, 0.0, None, slopes))
    qs, ks, vs = (t.transpose(1, 2).contiguous() for t in (q, k, v))  # [B, L, H, D]
    lens = torch.tensor([17, 200], dtype=torch.int32, device=q.device)
    torch.library.opcheck(torch.ops.evosdpa.attention_kvcache.default,
                          (qs, ks, vs, lens, None, _lib.CAUSAL_BOTTOM_RIGHT, math.nan, 0, True, "auto", -1, -1, 0.0,
                           slopes[0]))
    cu = torch.tensor([0, 150, 400], dtype=torch.int32, device=q.device)
    torch.library.opcheck(torch.ops.evosdpa.attention_varlen.default,
                          (qs.reshape(400, 4, 64), ks.reshape(400, 4, 64), vs.reshape(400, 4, 64), cu, cu, None, 250,
                           250, _lib.CAUSAL_NONE, math.nan, True, "auto", -1, -1, 0.0, slopes))


# ---- without a GPU ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def fake_cuda():
    """Yield a maker of fake CUDA tensors (no GPU needed)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        yield lambda *shape, dtype=torch.float16: torch.empty(shape, dtype=dtype, device="cuda")


def test_the_ops_take_alibi_slopes():
    for op in (torch.ops.evosdpa.attention_fwd, torch.ops.evosdpa.attention_kvcache,
               torch.ops.evosdpa.attention_varlen):
        assert str(op.default._schema).endswith("Tensor? alibi_slopes=None) -> (Tensor, Tensor)")


def test_accepted_forms():
    with fake_cuda() as cuda:
        q, k = cuda(2, 8, 16, 64), cuda(2, 2, 24, 64)
        f32 = torch.float32
        for slopes in (cuda(8, dtype=f32), cuda(2, 8, dtype=f32), cuda(1, 8, dtype=f32).expand(2, 8),
                       cuda(2, 16, dtype=f32)[:, ::2], cuda(3, 8, dtype=f32)[1:]):
            out, lse = evosdpa.attention(q, k, k, alibi_slopes=slopes, causal=True, return_lse=True)
            assert out.shape == (2, 8, 16, 64) and lse.shape == (2, 8, 16)
        assert evosdpa.attention(q.transpose(1, 2), k.transpose(1, 2), k.transpose(1, 2), layout="bshd",
                                 alibi_slopes=cuda(8, dtype=f32)).shape == (2, 16, 8, 64)
        packed_q, packed_k, offsets = cuda(40, 8, 64), cuda(60, 2, 64), cuda(4, dtype=torch.int32)
        for slopes in (cuda(8, dtype=f32), cuda(3, 8, dtype=f32)):  # B: the 3 sequences
            assert evosdpa.attention_varlen(packed_q, packed_k, packed_k, offsets, offsets, 30, 40,
                                            alibi_slopes=slopes).shape == (40, 8, 64)
        cache, lens = cuda(3, 100, 2, 64), cuda(3, dtype=torch.int32)
        for slopes in (cuda(8, dtype=f32), cuda(3, 8, dtype=f32)):
            assert evosdpa.attention_with_kvcache(cuda(3, 4, 8, 64), cache, cache, lens,
                                                  alibi_slopes=slopes).shape == (3, 4, 8, 64)


def test_bad_slopes_are_named():
    with fake_cuda() as cuda:
        q, k = cuda(2, 8, 16, 64), cuda(2, 2, 24, 64)
        f32 = torch.float32
        for slopes, exc, text in [
            ([0.5] * 8, TypeError, "alibi_slopes must be a torch.Tensor or None, got list"),
            (0.5, TypeError, "alibi_slopes must be a torch.Tensor or None, got float"),
            (cuda(8), TypeError, "alibi_slopes must be torch.float32, got torch.float16"),
            (cuda(8, dtype=torch.float64), TypeError, "alibi_slopes must be torch.float32, got torch.float64"),
            (cuda(2, dtype=f32), ValueError, r"alibi_slopes has shape \(2,\); expected \(Hq,\) = \(8,\) .* "
                                             r"\(B, Hq\) = \(2, 8\)"),
            (cuda(1, 8, dtype=f32), ValueError, r"alibi_slopes has shape \(1, 8\)"),  # FlashAttention's shapes only
            (cuda(8, 2, dtype=f32), ValueError, r"alibi_slopes has shape \(8, 2\)"),
            (cuda(2, 8, 1, dtype=f32), ValueError, r"alibi_slopes has shape \(2, 8, 1\)"),
            (cuda(dtype=f32), ValueError, r"alibi_slopes has shape \(\)"),
            (torch.ones(8), ValueError, "alibi_slopes is on cpu, q on cuda"),
        ]:
            with pytest.raises(exc, match=text):
                evosdpa.attention(q, k, k, alibi_slopes=slopes)
        fp8 = torch.float8_e4m3fn
        q8, k8, d = cuda(2, 8, 16, 64, dtype=fp8), cuda(2, 2, 24, 64, dtype=fp8), cuda(dtype=f32)
        with pytest.raises(ValueError, match="alibi_slopes takes float16 or bfloat16 inputs"):
            evosdpa.attention(q8, k8, k8, q_descale=d, k_descale=d, v_descale=d, alibi_slopes=cuda(8, dtype=f32))
        packed_q, packed_k, offsets = cuda(40, 8, 64), cuda(60, 2, 64), cuda(4, dtype=torch.int32)
        with pytest.raises(ValueError, match=r"alibi_slopes has shape \(2, 8\); .* \(B, Hq\) = \(3, 8\)"):
            evosdpa.attention_varlen(packed_q, packed_k, packed_k, offsets, offsets, 30, 40,
                                     alibi_slopes=cuda(2, 8, dtype=f32))
        with pytest.raises(TypeError, match="alibi_slopes must be a torch.Tensor or None, got list"):
            evosdpa.attention_varlen(packed_q, packed_k, packed_k, offsets, offsets, 30, 40, alibi_slopes=[0.5] * 8)
        cache, lens = cuda(3, 100, 2, 64), cuda(3, dtype=torch.int32)
        with pytest.raises(TypeError, match="alibi_slopes must be torch.float32, got torch.bfloat16"):
            evosdpa.attention_with_kvcache(cuda(3, 4, 8, 64), cache, cache, lens,
                                           alibi_slopes=cuda(8, dtype=torch.bfloat16))
        with pytest.raises(ValueError, match="alibi_slopes is on cpu, q on cuda"):
            evosdpa.attention_with_kvcache(cuda(3, 4, 8, 64), cache, cache, lens, alibi_slopes=torch.ones(3, 8))
        # PyTorch's SDPA has no ALiBi, nor has its drop-in.
        with pytest.raises(TypeError, match="alibi_slopes"):
            evosdpa.scaled_dot_product_attention(q, q, q, alibi_slopes=cuda(8, dtype=f32))
