"""Sliding windows and softcaps (C ABI 0.7): window_size and softcap of evosdpa.attention,
attention_varlen and attention_with_kvcache.

On a GPU, against float64 attention (accuracy.py) with the window's mask built here, independently of the
library: query i sees key j when diagonal(i) - left <= j <= diagonal(i) + right (a bound of -1: none), the
diagonal key i with a top-left causal mask and i + Lk - Lq otherwise (FlashAttention's alignment), and'ed
with the causal mask; a softcap c caps the scaled scores to c * tanh(s / c) before the masks. Window sizes
0, 1, odd and larger than the sequence, each side alone and both, with each causal alignment and none,
rows that see no key (exactly 0 with lse -inf), softcaps 30 and 50 on scores in the tens, grouped heads,
BSHD, size-1 dimensions at any stride, every kernel that has them; that the rule rejects a window one key
too wide; that kernels without them refuse by name; packed sequences and a KV cache per sequence;
torch.compile, opcheck; the gradient's NotImplementedError. Without a GPU: the argument checks."""
import math

import pytest

from conftest import HAVE_TORCH, needs_gpu, needs_torch, skip_unless_runs

if HAVE_TORCH:
    import torch

    from accuracy import check_attention

import evosdpa
from evosdpa import _lib

pytestmark = needs_torch

KERNELS = ["auto", "wgmma_sm90", "mma_sm80", "reference"]


def window_mask(lq, lk, left, right, causal, alignment, device):
    """[lq, lk] bool: the keys a sliding window (left, right) lets each query see, written from the
    definition: the diagonal key d(i) = i (top-left causal) or i + lk - lq, then d(i) - left <= j <= d(i) + right."""
    mask = torch.zeros(lq, lk, dtype=torch.bool)
    for i in range(lq):
        d = i if (causal and alignment == "top_left") else i + lk - lq
        lo = 0 if left < 0 else max(0, d - left)
        hi = lk - 1 if right < 0 else min(lk - 1, d + right)
        if lo <= hi:
            mask[i, lo:hi + 1] = True
    return mask.to(device)


def runs_here(kernel):
    skip_unless_runs(kernel, "a softcap", softcap=30.0)


# (B, Hq, Hkv, Lq, Lk, D, causal, alignment, window, softcap, qk std)
CASES = [
    (1, 2, 2, 1000, 1000, 64, True, "top_left", (37, -1), 0.0, 1.0),      # Mistral: causal, odd window
    (2, 4, 2, 777, 777, 128, True, "bottom_right", (0, -1), 0.0, 1.0),    # the diagonal key alone
    (1, 3, 3, 129, 129, 64, True, "top_left", (1, -1), 0.0, 1.0),
    (1, 2, 2, 513, 513, 128, True, "top_left", (5000, -1), 0.0, 1.0),     # wider than the sequence
    (1, 2, 2, 300, 700, 64, False, "top_left", (100, 50), 0.0, 1.0),      # both sides, Lq < Lk
    (1, 2, 2, 700, 300, 128, False, "top_left", (1, 1), 0.0, 1.0),        # Lq > Lk: first rows see no key
    (1, 2, 2, 400, 400, 64, False, "top_left", (-1, 3), 0.0, 1.0),        # right side alone
    (1, 2, 2, 300, 700, 128, False, "top_left", (-1, -1), 30.0, 6.0),     # softcap alone
    (2, 4, 4, 513, 513, 64, True, "top_left", (-1, -1), 50.0, 6.0),
    (2, 8, 4, 1000, 1000, 128, True, "bottom_right", (255, -1), 50.0, 4.0),  # Gemma 2's local layers
    (4, 16, 8, 1100, 1300, 64, False, "top_left", (200, 200), 30.0, 3.0),   # several items per CTA
]


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16] if HAVE_TORCH else [])
@pytest.mark.parametrize("case", CASES)
def test_matches_float64(kernel, dtype, case, rng):
    runs_here(kernel)
    b, hq, hkv, lq, lk, d, causal, alignment, window, softcap, std = case
    q = rng.randn(b, hq, lq, d, dtype=dtype, std=std)
    k, v = rng.randn(b, hkv, lk, d, dtype=dtype, std=std), rng.randn(b, hkv, lk, d, dtype=dtype)
    out, lse = evosdpa.attention(q, k, v, causal=causal, causal_alignment=alignment, window_size=window,
                                 softcap=softcap, return_lse=True, kernel=kernel)
    mask = window_mask(lq, lk, *window, causal, alignment, q.device)
    what = f"{kernel} {dtype} {case}"
    check_attention(out, q, k, v, causal=causal, alignment=alignment, lse=lse, rng=rng, what=what, mask=mask,
                    softcap=softcap)
    from accuracy import visible_mask
    no_key = ~(mask & visible_mask(lq, lk, causal, alignment, q.device)).any(dim=1)
    assert not out[:, :, no_key].ne(0).any(), f"{what}: O is not exactly 0 on the rows that see no key"


@needs_gpu
def test_bshd_and_scale(rng):
    q = rng.randn(2, 333, 4, 128, dtype=torch.bfloat16, std=5.0)
    k, v = rng.randn(2, 271, 2, 128, dtype=torch.bfloat16), rng.randn(2, 271, 2, 128, dtype=torch.bfloat16)
    out = evosdpa.attention(q, k, v, layout="bshd", scale=-0.2, window_size=(20, 9), softcap=30.0)
    mask = window_mask(333, 271, 20, 9, False, "top_left", q.device)
    check_attention(out.transpose(1, 2), q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), scale=-0.2,
                    mask=mask, softcap=30.0, rng=rng, what="bshd")


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("d", [64, 128])
def test_size_one_dimensions_take_any_stride(kernel, d, rng):
    """A size-1 dimension's stride is never used, whatever it is: q (2, 1, 1, D) viewed from (2, D, 1, 1), whose
    head and seq strides are 1 (contiguous to PyTorch), and K/V's single head at stride 3, with a softcap
    (which runs on wgmma_sm90 on Hopper, where such strides once failed the launch)."""
    runs_here(kernel)
    q = rng.randn(2, d, 1, 1, dtype=torch.bfloat16, std=3.0).permute(0, 2, 3, 1)
    assert q.is_contiguous() and q.stride() == (d, 1, 1, 1)
    k, v = (rng.randn(2, 300, d, dtype=torch.bfloat16, std=3.0).as_strided((2, 1, 300, d), (300 * d, 3, d, 1))
            for _ in range(2))
    out, lse = evosdpa.attention(q, k, v, softcap=30.0, return_lse=True, kernel=kernel)
    check_attention(out, q, k, v, softcap=30.0, lse=lse, rng=rng, what=f"{kernel} D={d}")


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
def test_rule_rejects_a_window_one_key_too_wide(kernel, rng):
    """The accuracy rule at these shapes tells a window of 33 keys from one of 32: the result for
    window_size=(32, -1) fails when judged as (31, -1), and a softcap of 31 fails as 30."""
    runs_here(kernel)
    q, k, v = (rng.randn(1, 2, 300, 64, dtype=torch.float16) for _ in range(3))
    out = evosdpa.attention(q, k, v, causal=True, window_size=(32, -1), kernel=kernel)
    check_attention(out, q, k, v, causal=True, mask=window_mask(300, 300, 32, -1, True, "top_left", q.device))
    with pytest.raises(AssertionError):
        check_attention(out, q, k, v, causal=True, mask=window_mask(300, 300, 31, -1, True, "top_left", q.device))
    q, k = (rng.randn(1, 2, 300, 64, dtype=torch.float16, std=6.0) for _ in range(2))
    out = evosdpa.attention(q, k, v, softcap=31.0, kernel=kernel)
    check_attention(out, q, k, v, softcap=31.0)
    with pytest.raises(AssertionError):
        check_attention(out, q, k, v, softcap=30.0)


@needs_gpu
def test_kernels_without_them_refuse(rng):
    q = rng.randn(1, 2, 200, 64, dtype=torch.float16)
    for kernel in ("splitkv_sm80",):
        for kw in ({"window_size": (10, -1)}, {"softcap": 30.0}):
            with pytest.raises(ValueError, match="not supported"):
                evosdpa.attention(q, q, q, kernel=kernel, **kw)


@needs_gpu
def test_no_backward_pass(rng):
    q = rng.randn(1, 2, 64, 64, dtype=torch.float16).requires_grad_()
    out = evosdpa.attention(q, q.detach(), q.detach(), window_size=(8, 0))
    with pytest.raises(NotImplementedError, match="sliding window, softcap or attn_mask"):
        out.sum().backward()


@needs_gpu
def test_varlen_per_sequence(rng):
    lengths_q, lengths_k = [0, 1, 77, 700, 300], [5, 1, 90, 650, 300]
    hq, hkv, d = 8, 2, 128
    q = rng.randn(sum(lengths_q), hq, d, dtype=torch.bfloat16, std=4.0)
    k = rng.randn(sum(lengths_k), hkv, d, dtype=torch.bfloat16, std=4.0)
    v = rng.randn(sum(lengths_k), hkv, d, dtype=torch.bfloat16)
    cu = [torch.tensor([0] + [sum(ls[:i + 1]) for i in range(len(ls))], dtype=torch.int32, device=q.device)
          for ls in (lengths_q, lengths_k)]
    for kernel in KERNELS:
        runs_here(kernel)
        out, lse = evosdpa.attention_varlen(q, k, v, cu[0], cu[1], max(lengths_q), max(lengths_k), causal=True,
                                            window_size=(63, -1), softcap=50.0, return_softmax_lse=True,
                                            kernel=kernel)
        qs = ks = 0
        for lq, lk in zip(lengths_q, lengths_k):
            if lq:
                sl = (slice(qs, qs + lq), slice(ks, ks + lk))
                mask = window_mask(lq, lk, 63, -1, True, "bottom_right", q.device)
                check_attention(out[sl[0]].transpose(0, 1), q[sl[0]].transpose(0, 1), k[sl[1]].transpose(0, 1),
                                v[sl[1]].transpose(0, 1), causal=True, alignment="bottom_right",
                                lse=lse[:, sl[0]], mask=mask, softcap=50.0, rng=rng,
                                what=f"varlen {kernel} ({lq}, {lk})")
            qs, ks = qs + lq, ks + lk


@needs_gpu
def test_kvcache_decode_with_a_window(rng):
    """Decoding against a dense cache with a sliding window: each sequence's new queries see the window of
    its own cache length."""
    b, hq, hkv, d, lq, cache = 3, 8, 2, 128, 4, 2048
    q = rng.randn(b, lq, hq, d, dtype=torch.float16)
    kc, vc = rng.randn(b, cache, hkv, d, dtype=torch.float16), rng.randn(b, cache, hkv, d, dtype=torch.float16)
    lens = [2048, 700, 5]
    seqlens = torch.tensor(lens, dtype=torch.int32, device=q.device)
    out = evosdpa.attention_with_kvcache(q, kc, vc, seqlens, causal=True, window_size=(255, -1), softcap=30.0)
    for i, n in enumerate(lens):
        mask = window_mask(lq, n, 255, -1, True, "bottom_right", q.device)
        check_attention(out[i].transpose(0, 1), q[i].transpose(0, 1), kc[i, :n].transpose(0, 1),
                        vc[i, :n].transpose(0, 1), causal=True, alignment="bottom_right", mask=mask, softcap=30.0,
                        rng=rng, what=f"kvcache sequence {i}")


@needs_gpu
def test_torch_compile_and_opcheck(rng):
    q, k, v = (rng.randn(2, 4, 200, 64, dtype=torch.float16) for _ in range(3))

    def f(q, k, v):
        return evosdpa.attention(q, k, v, causal=True, window_size=(31, -1), softcap=30.0)

    compiled = torch.compile(f, fullgraph=True)
    assert torch.equal(compiled(q, k, v), f(q, k, v))
    op = torch.ops.evosdpa.attention_fwd.default
    torch.library.opcheck(op, (q, k, v, _lib.CAUSAL_TOP_LEFT, math.nan, True, "bhsd", "auto", None, None, None,
                               None, True, 31, -1, 30.0))


def window_op_calls(q, kv, bshd_q, bshd_kv, packed_q, packed_kv, cu_q, cu_k):
    """Calls of the three raw ops with a window (left, right): q, kv [1, 2, Lq|Lk, 64] (bhsd), the same as
    [1, L, 2, 64] (bshd) and [L, 2, 64] (packed), cu_q, cu_k: int32 [2] (one sequence)."""
    nan = math.nan
    return [
        lambda w: torch.ops.evosdpa.attention_fwd(q, kv, kv, 0, nan, False, "bhsd", "auto", None, None, None, None,
                                                  True, *w),
        lambda w: torch.ops.evosdpa.attention_kvcache(bshd_q, bshd_kv, bshd_kv, None, None, 0, nan, 0, False, "auto",
                                                      *w),
        lambda w: torch.ops.evosdpa.attention_varlen(packed_q, packed_kv, packed_kv, cu_q, cu_k, None, 16, 32, 0, nan,
                                                     False, "auto", *w),
    ]


BAD_OP_WINDOWS = [(-5, -1), (0, -2)]


@needs_gpu
def test_the_ops_refuse_a_window_bound_below_minus_one_eagerly_and_compiled(rng):
    """The raw ops check their window bounds as the public functions do: a bound below -1 is a ValueError,
    eagerly and under torch.compile (whose fake implementations check them too), not "no window"."""
    q, kv = rng.randn(1, 2, 16, 64, dtype=torch.float16), rng.randn(1, 2, 32, 64, dtype=torch.float16)
    bshd_q, bshd_kv = q.transpose(1, 2).contiguous(), kv.transpose(1, 2).contiguous()
    cu_q = torch.tensor([0, 16], dtype=torch.int32, device=q.device)
    cu_k = torch.tensor([0, 32], dtype=torch.int32, device=q.device)
    calls = window_op_calls(q, kv, bshd_q, bshd_kv, bshd_q[0], bshd_kv[0], cu_q, cu_k)
    for call in calls:
        call((4, -1))  # a valid window runs
        for window in BAD_OP_WINDOWS:
            with pytest.raises(ValueError, match=rf"window_size \({window[0]}, {window[1]}\)"):
                call(window)
            torch._dynamo.reset()
            compiled = torch.compile(lambda: call(window), fullgraph=True)
            # Dynamo may wrap the fake implementation's ValueError in its own RuntimeError; the message stays.
            with pytest.raises((ValueError, RuntimeError), match=rf"window_size \({window[0]}, {window[1]}\)"):
                compiled()


# ---- without a GPU ---------------------------------------------------------------------------------------


def test_the_ops_fake_implementations_refuse_a_window_bound_below_minus_one():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        def cuda(*shape, dtype=torch.float16):
            return torch.empty(shape, dtype=dtype, device="cuda")

        calls = window_op_calls(cuda(1, 2, 16, 64), cuda(1, 2, 32, 64), cuda(1, 16, 2, 64), cuda(1, 32, 2, 64),
                                cuda(16, 2, 64), cuda(32, 2, 64), cuda(2, dtype=torch.int32),
                                cuda(2, dtype=torch.int32))
        for call in calls:
            call((4, -1))
            for window in BAD_OP_WINDOWS:
                with pytest.raises(ValueError, match=rf"window_size \({window[0]}, {window[1]}\)"):
                    call(window)


@pytest.mark.parametrize("window, exc", [((1,), TypeError), ((1, 2, 3), TypeError), ((1.5, 2), TypeError),
                                          ((True, 2), TypeError), ("ab", TypeError), ((-2, 0), ValueError),
                                          ((0, -5), ValueError)])
def test_bad_window_size(window, exc):
    x = torch.empty(1, 1, 8, 64, dtype=torch.float16, device="meta")
    with pytest.raises(exc, match="window_size"):
        evosdpa.attention(x, x, x, window_size=window)


@pytest.mark.parametrize("softcap, exc", [(-1.0, ValueError), (math.inf, ValueError), (math.nan, ValueError),
                                          ("30", TypeError), (True, TypeError)])
def test_bad_softcap(softcap, exc):
    x = torch.empty(1, 1, 8, 64, dtype=torch.float16, device="meta")
    with pytest.raises(exc, match="softcap"):
        evosdpa.attention(x, x, x, softcap=softcap)
