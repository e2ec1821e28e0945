"""The PyTorch op on a GPU: against torch's SDPA in float64 on upcast inputs, layouts, lse, causal
alignments, grouped heads, torch.compile(fullgraph=True), CUDA-graph capture and replay, opcheck."""
import math

import pytest

from conftest import have_gpu, needs_gpu

pytestmark = needs_gpu

if have_gpu():
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

import evosdpa

FLOOR = {"float16": 1e-3, "bfloat16": 8e-3}


def visible_mask(lq, lk, causal, alignment, device):
    i = torch.arange(lq, device=device)[:, None]
    j = torch.arange(lk, device=device)[None, :]
    if not causal:
        return torch.ones(lq, lk, dtype=torch.bool, device=device)
    return j <= i + (lk - lq if alignment == "bottom_right" else 0)


def reference(q, k, v, causal, alignment, scale=None):
    """float64 O and lse from BHSD inputs (heads of k/v repeated for grouped queries)."""
    group = q.shape[1] // k.shape[1]
    q64, k64, v64 = q.double(), k.double().repeat_interleave(group, 1), v.double().repeat_interleave(group, 1)
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    s = (q64 @ k64.transpose(-1, -2)) * scale
    mask = visible_mask(q.shape[2], k.shape[2], causal, alignment, q.device)
    s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    return p @ v64, lse


def same_precision(q, k, v, causal, alignment, scale=None):
    """PyTorch's plain math SDPA in the input dtype: the error yardstick."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    mask = visible_mask(q.shape[2], k.shape[2], causal, alignment, q.device)
    with sdpa_kernel([SDPBackend.MATH]):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    return out.nan_to_num(0.0)


def to_layout(t, layout):
    return t if layout == "bhsd" else t.transpose(1, 2).contiguous()


def from_layout(t, layout):
    return t if layout == "bhsd" else t.transpose(1, 2)


CASES = [
    # (B, Hq, Hkv, Lq, Lk, D, causal, alignment)
    (1, 8, 8, 512, 512, 64, False, "top_left"),
    (1, 8, 8, 512, 512, 64, True, "top_left"),
    (2, 8, 8, 2048, 2048, 64, True, "top_left"),
    (2, 8, 8, 2048, 2048, 128, False, "top_left"),
    (1, 2, 2, 1, 1, 64, True, "top_left"),
    (1, 2, 2, 17, 17, 128, False, "top_left"),
    (1, 2, 2, 129, 129, 64, True, "top_left"),
    (1, 2, 2, 1000, 1000, 128, True, "top_left"),
    (1, 2, 2, 100, 300, 64, True, "top_left"),
    (1, 2, 2, 300, 100, 64, True, "top_left"),
    (1, 2, 2, 100, 300, 128, True, "bottom_right"),
    (1, 2, 2, 300, 100, 128, True, "bottom_right"),
    (2, 8, 2, 257, 257, 64, True, "bottom_right"),
]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "b{}h{}x{}_q{}k{}_d{}_{}".format(*c[:6], c[7] if c[6] else "full"))
def test_matches_float64(case, layout, dtype):
    b, hq, hkv, lq, lk, d, causal, alignment = case
    dt = getattr(torch, dtype)
    q = torch.randn(b, hq, lq, d, device="cuda", dtype=dt)
    k = torch.randn(b, hkv, lk, d, device="cuda", dtype=dt)
    v = torch.randn(b, hkv, lk, d, device="cuda", dtype=dt)
    out, lse = evosdpa.attention(to_layout(q, layout), to_layout(k, layout), to_layout(v, layout), causal=causal,
                                 causal_alignment=alignment, return_lse=True, layout=layout)
    out = from_layout(out, layout)
    assert out.shape == q.shape and out.dtype == dt and lse.shape == (b, hq, lq) and lse.dtype == torch.float32
    assert torch.isfinite(out).all()
    ref_o, ref_lse = reference(q, k, v, causal, alignment)
    base = (same_precision(q, k, v, causal, alignment).double() - ref_o).abs().max().item()
    err = (out.double() - ref_o).abs().max().item()
    assert err <= 2 * base + FLOOR[dtype], f"max error {err}, same-precision baseline {base}"
    has_key = torch.isfinite(ref_lse)
    assert torch.equal(torch.isinf(lse) & (lse < 0), ~has_key)
    lse_err = (lse.double() - ref_lse)[has_key].abs().max().item() if has_key.any() else 0.0
    assert lse_err <= 1e-4 * max(1.0, ref_lse[has_key].abs().max().item())


def test_sdpa_is_a_drop_in():
    q, k, v = (torch.randn(2, 8, 300, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    for is_causal in (False, True):
        ours = evosdpa.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=0.2)
        ref, _ = reference(q, k, v, is_causal, "top_left", scale=0.2)
        theirs = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=0.2)
        base = (theirs.double() - ref).abs().max().item()
        assert (ours.double() - ref).abs().max().item() <= 2 * base + FLOOR["float16"]
    three_d = evosdpa.scaled_dot_product_attention(q[0], k[0], v[0], is_causal=True)
    assert three_d.shape == q[0].shape
    kg, vg = k[:, :2], v[:, :2]
    gqa = evosdpa.scaled_dot_product_attention(q, kg, vg, enable_gqa=True)
    ref, _ = reference(q, kg, vg, False, "top_left")
    assert (gqa.double() - ref).abs().max().item() < 5e-3


def test_empty_keys_and_queries():
    q = torch.randn(1, 2, 5, 64, device="cuda", dtype=torch.float16)
    kv = torch.randn(1, 2, 0, 64, device="cuda", dtype=torch.float16)
    out, lse = evosdpa.attention(q, kv, kv, return_lse=True)
    assert (out == 0).all() and torch.isneginf(lse).all()
    out = evosdpa.attention(q[:, :, :0], q, q)
    assert out.shape == (1, 2, 0, 64)


def test_strided_inputs():
    base = torch.randn(2, 300, 4, 3, 64, device="cuda", dtype=torch.bfloat16)  # packed qkv, BSHD views
    q, k, v = base[:, :, :, 0], base[:, :, :, 1], base[:, :, :, 2]
    out = evosdpa.attention(q, k, v, layout="bshd", causal=True)
    ref, _ = reference(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), True, "top_left")
    assert (out.transpose(1, 2).double() - ref).abs().max().item() < 3e-2


def test_torch_compile_fullgraph():
    q, k, v = (torch.randn(2, 4, 256, 128, device="cuda", dtype=torch.float16) for _ in range(3))

    def f(q, k, v):
        return evosdpa.attention(q * 2, k, v, causal=True) + 1

    eager = f(q, k, v)
    compiled = torch.compile(f, fullgraph=True)(q, k, v)
    torch.testing.assert_close(compiled, eager, rtol=0, atol=0)


def test_cuda_graph_capture_and_replay():
    q, k, v = (torch.randn(1, 8, 512, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    expected = evosdpa.attention(q, k, v)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        evosdpa.attention(q, k, v)  # warm-up on the side stream, as torch.cuda.graphs asks
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = evosdpa.attention(q, k, v)
    out.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    q.copy_(torch.randn_like(q))  # replay reads the new inputs
    g.replay()
    torch.testing.assert_close(out, evosdpa.attention(q, k, v), rtol=0, atol=0)


def test_runs_on_the_current_stream():
    q, k, v = (torch.randn(2, 8, 1024, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    expected = evosdpa.attention(q, k, v)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = evosdpa.attention(q, k, v)
        out2 = out * 1  # ordered after the kernel only if it ran on s
    torch.cuda.current_stream().wait_stream(s)
    torch.testing.assert_close(out2, expected, rtol=0, atol=0)


def test_opcheck():
    q, k, v = (torch.randn(1, 4, 200, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    for args in [(q, k, v, 0, 0.0, True, "bhsd", "auto"), (q, k, v, 2, 0.125, False, "bhsd", "mma_sm80")]:
        torch.library.opcheck(torch.ops.evosdpa.attention_fwd.default, args)


def test_named_kernels_agree():
    q, k, v = (torch.randn(1, 4, 333, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    fast = evosdpa.attention(q, k, v, causal=True, kernel="mma_sm80")
    slow = evosdpa.attention(q, k, v, causal=True, kernel="reference")
    assert (fast.float() - slow.float()).abs().max().item() < 5e-3
    with pytest.raises(ValueError, match="unknown kernel"):
        evosdpa.attention(q, k, v, kernel="fastest")
