"""The GPU tests' accuracy helper (accuracy.py) on the CPU: a correct fused computation passes it and
planted bugs do not. Needs PyTorch, no GPU."""
import math

import pytest

from conftest import HAVE_TORCH, Rng, needs_torch

if HAVE_TORCH:
    import torch

    from accuracy import check_attention, effective_scale, visible_mask

pytestmark = needs_torch


def tiled_attention(q, k, v, causal=False, alignment="top_left", scale=None, block=64):
    """What a correct fused kernel computes (online softmax over key tiles, float32 running max and sum,
    P rounded to the dtype before P·V): (O in q.dtype, lse float32). q: [B, Hq, Lq, D]."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    mask = visible_mask(q.shape[2], k.shape[2], causal, alignment, q.device)
    m = torch.full((*q.shape[:-1], 1), -math.inf)
    m_safe, l = torch.zeros_like(m), torch.zeros_like(m)
    acc = torch.zeros(q.shape, dtype=torch.float32)
    for j in range(0, k.shape[2], block):
        s = (q.float() @ k[:, :, j:j + block].float().transpose(-1, -2)) * effective_scale(scale, q.shape[-1])
        s = s.masked_fill(~mask[:, j:j + block], -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        alpha = torch.exp(m - m_safe)
        p = torch.exp(s - m_safe)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p.to(q.dtype).float() @ v[:, :, j:j + block].float()
        m = m_new
    o = torch.where(l > 0, acc / l, torch.zeros_like(acc)).to(q.dtype)
    lse = torch.where(l > 0, m_safe + torch.log(l), torch.full_like(l, -math.inf)).squeeze(-1)
    return o, lse


CASES = [  # (Hq, Hkv, Lq, Lk, D, causal, alignment, scale, std)
    (2, 2, 150, 150, 64, False, "top_left", None, 1.0),
    (4, 2, 70, 200, 128, True, "bottom_right", -0.4, 1.0),
    (2, 1, 200, 70, 64, True, "bottom_right", None, 6.0),  # rows with no visible key, grouped heads
    (2, 2, 130, 130, 64, True, "top_left", 0.0, 1.0),
]


@pytest.fixture(params=["float16", "bfloat16"])
def dtype(request):
    return getattr(torch, request.param)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_a_correct_fused_computation_passes(case, dtype):
    hq, hkv, lq, lk, d, causal, alignment, scale, std = case
    rng = Rng(1234, device="cpu")
    q, k, v = rng.randn(1, hq, lq, d, dtype=dtype, std=std), rng.randn(1, hkv, lk, d, dtype=dtype, std=std), \
        rng.randn(1, hkv, lk, d, dtype=dtype)
    o, lse = tiled_attention(q, k, v, causal, alignment, scale)
    check_attention(o, q, k, v, causal=causal, alignment=alignment, scale=scale, lse=lse, rng=rng)


def test_planted_bugs_fail(dtype):
    rng = Rng(99, device="cpu")
    q, k, v = rng.randn(1, 4, 96, 64, dtype=dtype), rng.randn(1, 2, 160, 64, dtype=dtype), rng.randn(1, 2, 160, 64, dtype=dtype)
    o, lse = tiled_attention(q, k, v, True, "bottom_right")

    def fails(out, out_lse=None, **kw):
        args = dict(causal=True, alignment="bottom_right")
        args.update(kw)
        with pytest.raises(AssertionError, match=r"inputs from EVOSDPA_TEST_SEED=99"):
            check_attention(out, q, k, v, lse=out_lse, rng=rng, **args)

    check_attention(o, q, k, v, causal=True, alignment="bottom_right", lse=lse, rng=rng)
    fails(tiled_attention(q, k, v, True, "top_left")[0])                           # wrong causal alignment
    fails(tiled_attention(q, k, v, False)[0])                                      # mask ignored
    fails(tiled_attention(q, k, v, True, "bottom_right", scale=0.2)[0])            # scale not applied
    fails(tiled_attention(q, k.repeat(1, 2, 1, 1), v.repeat(1, 2, 1, 1), True, "bottom_right")[0])  # head map
    fails(o.transpose(1, 2).reshape(o.shape))                                      # layout mix-up
    for poison in (math.nan, math.inf):
        bad = o.clone()
        bad[0, 3, 50, 7] = poison
        fails(bad)
    bad = o.clone()
    bad[0, 1, 10] *= 1.5                                                           # one row off
    fails(bad)
    fails(o, lse + 1e-2)                                                           # lse off
    fails(o, lse - math.log(2))                                                    # lse of a half-sum
    bad_lse = lse.clone()
    bad_lse[0, 0, 0] = -math.inf                                                   # -inf where a key is seen
    fails(o, bad_lse)
    fails(o[..., :32])                                                             # wrong shape
    fails(o.float())                                                               # wrong dtype


def test_no_keys_means_zero_and_minus_infinity():
    rng = Rng(5, device="cpu")
    q, kv = rng.randn(1, 2, 5, 64, dtype=torch.float16), rng.randn(1, 2, 0, 64, dtype=torch.float16)
    zero, neg_inf = torch.zeros(1, 2, 5, 64, dtype=torch.float16), torch.full((1, 2, 5), -math.inf)
    check_attention(zero, q, kv, kv, lse=neg_inf)
    with pytest.raises(AssertionError):
        check_attention(zero + 1e-3, q, kv, kv)
    with pytest.raises(AssertionError):
        check_attention(zero, q, kv, kv, lse=torch.zeros(1, 2, 5))


def test_inputs_are_replayable_and_never_zero():
    a, b = Rng(7, device="cpu"), Rng(7, device="cpu")
    x = a.randn(1000, 64, dtype=torch.bfloat16, std=1e-3)
    assert torch.equal(x, b.randn(1000, 64, dtype=torch.bfloat16, std=1e-3)) and not (x == 0).any()
    assert not torch.equal(x, Rng(8, device="cpu").randn(1000, 64, dtype=torch.bfloat16, std=1e-3))
