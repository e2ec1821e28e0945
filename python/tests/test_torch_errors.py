"""Bad input raises TypeError/ValueError/NotImplementedError naming the problem; needs PyTorch, no GPU.

What must be accepted is checked too, off the GPU: under FakeTensorMode, tensors on "cuda" carry shape,
dtype and strides without a device, and the op runs its fake implementation, so a call that passes every
check returns a fake output of the right shape."""
import contextlib
import math

import pytest

from conftest import HAVE_TORCH, needs_torch

if HAVE_TORCH:
    import torch

import evosdpa

pytestmark = needs_torch


def meta(*shape, dtype=None):
    # Tensors on the meta device carry shape, dtype and strides without memory or a GPU.
    return torch.empty(*shape, dtype=dtype or torch.float16, device="meta")


def qkv(shape=(2, 4, 16, 64), dtype=None):
    return meta(*shape, dtype=dtype), meta(*shape, dtype=dtype), meta(*shape, dtype=dtype)


@contextlib.contextmanager
def fake_cuda():
    """Yield a maker of fake CUDA tensors (no GPU needed)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        yield lambda *shape, dtype=torch.float16: torch.empty(shape, dtype=dtype, device="cuda")


@pytest.mark.parametrize("make, exc, text", [
    (lambda: (torch.zeros(1, 1, 8, 64, dtype=torch.float16),) * 3, ValueError, "needs CUDA tensors"),
    (lambda: ("q", meta(1, 1, 8, 64), meta(1, 1, 8, 64)), TypeError, "q must be a torch.Tensor"),
    (lambda: qkv(dtype=torch.float32), TypeError, "supported: torch.float16, torch.bfloat16"),
    (lambda: (meta(2, 4, 16, 64), meta(2, 4, 16, 64, dtype=torch.bfloat16), meta(2, 4, 16, 64)), TypeError,
     "share a dtype"),
    (lambda: (meta(4, 16, 64),) * 3, ValueError, "must be 4-D"),
    (lambda: qkv((2, 4, 16, 80)), ValueError, "head_dim 80 is not supported"),
    (lambda: (meta(2, 4, 16, 64), meta(3, 4, 16, 64), meta(3, 4, 16, 64)), ValueError, "batch sizes differ"),
    (lambda: (meta(2, 4, 16, 64), meta(2, 3, 16, 64), meta(2, 3, 16, 64)), ValueError, "multiple of k/v heads"),
    (lambda: (meta(2, 4, 16, 64), meta(2, 0, 16, 64), meta(2, 0, 16, 64)), ValueError, "multiple of k/v heads"),
    (lambda: (meta(2, 4, 16, 64), meta(2, 4, 16, 128), meta(2, 4, 16, 128)), ValueError, "head_dim differs"),
    (lambda: (meta(2, 4, 16, 64), meta(2, 4, 16, 64), meta(2, 4, 17, 64)), ValueError, "sequence lengths differ"),
])
def test_bad_tensors(make, exc, text):
    q, k, v = make()
    with pytest.raises(exc, match=text):
        evosdpa.attention(q, k, v)


def test_a_tensor_off_the_gpu_is_named():
    # q on the CPU, k and v on meta: the first tensor not on a CUDA device is the one named. (q, k, v on
    # two different CUDA devices raise "must be on one device"; that needs two GPUs to test.)
    q = torch.zeros(1, 1, 8, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="q is on cpu; evosdpa needs CUDA tensors"):
        evosdpa.attention(q, meta(1, 1, 8, 64), meta(1, 1, 8, 64))


def test_bad_options():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="layout"):
        evosdpa.attention(q, k, v, layout="sbhd")
    with pytest.raises(ValueError, match="causal_alignment"):
        evosdpa.attention(q, k, v, causal=True, causal_alignment="middle")
    for bad in (float("nan"), float("inf"), -float("inf"), 1e39):
        with pytest.raises(ValueError, match="scale must be None or a finite"):
            evosdpa.attention(q, k, v, scale=bad)
        with pytest.raises(ValueError, match="scale must be None or a finite"):
            evosdpa.scaled_dot_product_attention(q, k, v, scale=bad)
    with pytest.raises(TypeError, match="scale must be a float"):
        evosdpa.attention(q, k, v, scale="0.1")
    with pytest.raises(TypeError, match="kernel"):
        evosdpa.attention(q, k, v, kernel=3)


def test_sdpa_unsupported_arguments_are_named():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="attn_mask cannot be combined with is_causal"):  # as PyTorch
        evosdpa.scaled_dot_product_attention(q, k, v, attn_mask=meta(16, 16), is_causal=True)
    with pytest.raises(NotImplementedError, match="dropout_p"):
        evosdpa.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
    with pytest.raises(NotImplementedError, match="value head dim"):
        evosdpa.scaled_dot_product_attention(q, k, meta(2, 4, 16, 128))
    with pytest.raises(ValueError, match="enable_gqa"):
        evosdpa.scaled_dot_product_attention(q, meta(2, 2, 16, 64), meta(2, 2, 16, 64))


def test_sdpa_shape_errors():
    with pytest.raises(ValueError, match="at least 2-D"):
        evosdpa.scaled_dot_product_attention(meta(64), meta(64), meta(64))
    with pytest.raises(ValueError, match="enable_gqa needs a heads dimension"):
        evosdpa.scaled_dot_product_attention(meta(16, 64), meta(16, 64), meta(16, 64), enable_gqa=True)
    # Leading (batch) dimensions must match exactly: PyTorch would broadcast these, evosdpa says it does not.
    for q, k in [(meta(2, 3, 4, 16, 64), meta(1, 3, 4, 16, 64)), (meta(2, 4, 16, 64), meta(4, 16, 64)),
                 (meta(2, 3, 4, 16, 64), meta(3, 2, 4, 16, 64))]:
        with pytest.raises(ValueError, match="same leading .batch. dimensions; broadcasting them is not supported"):
            evosdpa.scaled_dot_product_attention(q, k, k)


def test_scale_zero_passes_validation():
    # On meta tensors every check before the device check has passed once "needs CUDA tensors" is raised.
    q, k, v = qkv()
    for f in (lambda: evosdpa.attention(q, k, v, scale=0.0),
              lambda: evosdpa.scaled_dot_product_attention(q, k, v, scale=0.0),
              lambda: evosdpa.attention(q, k, v, scale=-0.0)):
        with pytest.raises(ValueError, match="needs CUDA tensors"):
            f()
    with fake_cuda() as cuda:
        q, k, v = cuda(2, 4, 16, 64), cuda(2, 4, 16, 64), cuda(2, 4, 16, 64)
        assert evosdpa.attention(q, k, v, scale=0.0).shape == (2, 4, 16, 64)
        assert evosdpa.scaled_dot_product_attention(q, k, v, scale=0.0, is_causal=True).shape == (2, 4, 16, 64)


@pytest.mark.parametrize("q_shape, kv_shape, gqa", [
    ((2, 3, 4, 16, 64), (2, 3, 4, 24, 64), False),     # 5-D
    ((2, 3, 4, 16, 64), (2, 3, 2, 24, 64), True),      # 5-D, grouped heads along dim -3
    ((2, 1, 2, 3, 8, 16, 128), (2, 1, 2, 3, 8, 5, 128), False),  # 7-D
    ((0, 3, 4, 16, 64), (0, 3, 4, 16, 64), False),     # an empty batch dimension
    ((4, 16, 64), (4, 24, 64), False),                 # 3-D (H, L, E)
    ((8, 4, 16, 64), (8, 1, 24, 64), True),           # multi-query
    ((16, 64), (24, 64), False),                       # 2-D (L, E), as PyTorch accepts
])
def test_sdpa_accepts_any_batch_dimensions(q_shape, kv_shape, gqa):
    with fake_cuda() as cuda:
        q, k, v = cuda(*q_shape), cuda(*kv_shape), cuda(*kv_shape)
        out = evosdpa.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        assert out.shape == q.shape and out.dtype == q.dtype and out.device.type == "cuda"


def test_strided_last_dimension_is_copied():
    with fake_cuda() as cuda:
        q = cuda(2, 4, 64, 16).transpose(-1, -2)  # [2, 4, 16, 64] with stride(-1) == 16
        k = cuda(2, 64, 16, 4).permute(0, 3, 2, 1)  # [2, 4, 16, 64], heads innermost
        assert q.stride(-1) != 1 and k.stride(-1) != 1
        assert evosdpa.attention(q, k, k).shape == (2, 4, 16, 64)
        assert evosdpa.scaled_dot_product_attention(q, k, q).shape == (2, 4, 16, 64)
        assert evosdpa.attention(q.transpose(1, 2), k.transpose(1, 2), k.transpose(1, 2), layout="bshd").shape \
            == (2, 16, 4, 64)
        # The op itself requires stride 1 (the functions above make the copy).
        with pytest.raises(ValueError, match="contiguous last dimension"):
            torch.ops.evosdpa.attention_fwd(q, k, k, 0, math.nan, False, "bhsd", "auto")


def test_op_scale_nan_is_the_default_and_inf_is_refused():
    with fake_cuda() as cuda:
        q = cuda(1, 2, 16, 64)
        out, lse = torch.ops.evosdpa.attention_fwd(q, q, q, 0, math.nan, True, "bhsd", "auto")
        assert out.shape == (1, 2, 16, 64) and lse.shape == (1, 2, 16) and lse.dtype == torch.float32
        torch.ops.evosdpa.attention_fwd(q, q, q, 0, 0.0, False, "bhsd", "auto")
        for bad in (math.inf, -math.inf):
            with pytest.raises(ValueError, match="scale must be finite"):
                torch.ops.evosdpa.attention_fwd(q, q, q, 0, bad, False, "bhsd", "auto")


# ---- FP8 (torch.float8_e4m3fn) inputs ------------------------------------------------------------------

def fp8_call(cuda, descale_shapes=((), (), ()), out_dtype=None, **kw):
    q = cuda(2, 8, 16, 64, dtype=torch.float8_e4m3fn)
    k = cuda(2, 4, 24, 64, dtype=torch.float8_e4m3fn)
    v = cuda(2, 4, 24, 64, dtype=torch.float8_e4m3fn)
    ds = [None if s is None else cuda(*s, dtype=torch.float32) for s in descale_shapes]
    return evosdpa.attention(q, k, v, q_descale=ds[0], k_descale=ds[1], v_descale=ds[2], out_dtype=out_dtype, **kw)


def test_fp8_accepted_forms():
    with fake_cuda() as cuda:
        out = fp8_call(cuda)
        assert out.shape == (2, 8, 16, 64) and out.dtype == torch.bfloat16  # FlashAttention-3's output type
        assert fp8_call(cuda, ((1,), (1,), (1,)), out_dtype=torch.float16).dtype == torch.float16
        out, lse = fp8_call(cuda, ((2, 4), (2, 4), (2, 4)), return_lse=True, causal=True)
        assert out.dtype == torch.bfloat16 and lse.shape == (2, 8, 16) and lse.dtype == torch.float32


@pytest.mark.parametrize("shapes, out_dtype, exc, text", [
    (((), None, ()), None, ValueError, "k_descale is missing"),
    (((), (), ()), "float32", TypeError, "out_dtype must be torch.float16 or torch.bfloat16"),
    (((), (2, 8), (2, 8)), None, ValueError, r"k_descale has shape \(2, 8\); expected .* \(2, 4\)"),
    (((2, 4), (), ()), None, ValueError, "must share a granularity"),
])
def test_fp8_bad_arguments_are_named(shapes, out_dtype, exc, text):
    with fake_cuda() as cuda:
        with pytest.raises(exc, match=text):
            fp8_call(cuda, shapes, out_dtype=None if out_dtype is None else getattr(torch, out_dtype))


def test_fp8_descale_dtype_and_sixteen_bit_inputs():
    with fake_cuda() as cuda:
        q8 = cuda(1, 2, 8, 64, dtype=torch.float8_e4m3fn)
        d = cuda(dtype=torch.float32)
        with pytest.raises(TypeError, match="v_descale must be float32"):
            evosdpa.attention(q8, q8, q8, q_descale=d, k_descale=d, v_descale=cuda(dtype=torch.float16))
        with pytest.raises(TypeError, match="q, k, v must share a dtype"):
            evosdpa.attention(q8, cuda(1, 2, 8, 64), q8, q_descale=d, k_descale=d, v_descale=d)
        q = cuda(1, 2, 8, 64)
        with pytest.raises(ValueError, match="q_descale is given but the inputs are torch.float16"):
            evosdpa.attention(q, q, q, q_descale=d)
        with pytest.raises(ValueError, match="out_dtype torch.bfloat16 is for float8_e4m3fn inputs"):
            evosdpa.attention(q, q, q, out_dtype=torch.bfloat16)
        assert evosdpa.attention(q, q, q, out_dtype=torch.float16).dtype == torch.float16
        # A descale on another device than q (here the CPU): named.
        d = torch.ones((), device="cpu")
        with pytest.raises(ValueError, match="q_descale is on cpu, q on cuda"):
            evosdpa.attention(q8, q8, q8, q_descale=d, k_descale=d, v_descale=d)


def test_quantize_fp8_scales_and_rounds():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2, 8, 33, 64, generator=gen) * 3
    x8, d = evosdpa.quantize_fp8(x)
    assert x8.dtype == torch.float8_e4m3fn and x8.shape == x.shape and d.shape == () and d.dtype == torch.float32
    assert torch.isclose(d, x.abs().amax() / 448)
    assert x8.float().abs().amax() == 448  # the largest magnitude maps to E4M3's largest value
    back = x8.float() * d
    assert ((back - x).abs() <= x.abs() * 2**-4 + d * 2**-9 + 1e-6).all()  # half an E4M3 step at most
    # Per (batch, K/V head), grouped: q's 8 heads over 4 K/V heads, in both layouts.
    x8h, dh = evosdpa.quantize_fp8(x, "head", heads_kv=4)
    assert dh.shape == (2, 4)
    want = x.reshape(2, 4, -1).abs().amax(dim=2) / 448
    assert torch.allclose(dh, want)
    x8s, ds = evosdpa.quantize_fp8(x.transpose(1, 2), "head", layout="bshd", heads_kv=4)
    assert torch.equal(ds, dh) and torch.equal(x8s.transpose(1, 2).float(), x8h.float())
    # Overflow clamps to 448 whatever the PyTorch release does with it; zeros get descale 1.
    z8, dz = evosdpa.quantize_fp8(torch.zeros(1, 1, 4, 64))
    assert dz == 1 and (z8.float() == 0).all()
    with pytest.raises(ValueError, match="multiple of heads_kv"):
        evosdpa.quantize_fp8(x, "head", heads_kv=3)
    with pytest.raises(ValueError, match="granularity"):
        evosdpa.quantize_fp8(x, "row")


def test_quantize_fp8_carries_nan_and_inf_into_the_descale():
    # A NaN element gave descale 1 (NaN > 0 is False) and left x unscaled; now the descale says it.
    x = torch.ones(1, 2, 4, 64)
    x[0, 1, 2, 3] = float("nan")
    _, d = evosdpa.quantize_fp8(x)
    assert d.isnan()
    _, dh = evosdpa.quantize_fp8(x, "head")
    assert dh[0, 0] == 1 / 448 and dh[0, 1].isnan()
    x[0, 1, 2, 3] = float("inf")
    assert evosdpa.quantize_fp8(x)[1].isinf()


def test_scales_past_float_in_the_log2_domain_are_refused():
    # The kernels scale by scale * log2(e): 3e38 gave O = NaN on every kernel.
    q, k, v = qkv()
    for s in (3e38, -3e38):
        with pytest.raises(ValueError, match="scale must be None or a finite value of magnitude at most"):
            evosdpa.attention(q, k, v, scale=s)
    with fake_cuda() as cuda:
        q = cuda(2, 4, 16, 64)
        assert evosdpa.attention(q, q, q, scale=2.3e38).shape == q.shape


def test_flash_attention_positional_k_v_in_kvcache_are_named():
    # flash_attn_with_kvcache(q, k_cache, v_cache, k, v): here the 4th argument is cache_seqlens.
    q, kc, vc = meta(2, 1, 8, 64), meta(2, 64, 8, 64), meta(2, 64, 8, 64)
    with pytest.raises(TypeError, match="4th and 5th arguments k and v"):
        evosdpa.attention_with_kvcache(q, kc, vc, meta(2, 1, 8, 64), meta(2, 1, 8, 64))


def test_a_mask_that_does_not_broadcast_over_the_batch_dimensions_is_named():
    with fake_cuda() as cuda:
        q = cuda(2, 3, 4, 16, 64)
        with pytest.raises(ValueError, match="attn_mask of shape .* does not broadcast to the query's batch"):
            evosdpa.scaled_dot_product_attention(q, q, q, attn_mask=cuda(5, 1, 16, 16, dtype=torch.bool))
        m = cuda(2, 1, 1, 16, 16, dtype=torch.bool)
        assert evosdpa.scaled_dot_product_attention(q, q, q, attn_mask=m).shape == q.shape


def test_expanded_mask_dimensions_stay_broadcast():
    from evosdpa.torch_ops import _broadcast_mask

    keep = torch.ones(8, 1, 1, 1001, dtype=torch.bool)
    full = (8, 32, 1000, 1001)
    m = _broadcast_mask(keep.expand(*full), full)
    assert m.shape == (8, 1, 1, 1001) and m.data_ptr() == keep.data_ptr()  # a view, no copy
    # The key dimension too (a per-row mask broadcast over keys), and a 2-D [Lq, Lk] one.
    rows = torch.zeros(1000, 1).expand(1000, 1001)
    assert _broadcast_mask(rows, full).shape == (1, 1, 1000, 1)
    assert _broadcast_mask(torch.zeros(1000, 1001), full).shape == (1, 1, 1000, 1001)


def test_rows_the_fast_kernels_cannot_read_are_copied():
    from evosdpa.torch_ops import _aligned_rows

    x = torch.zeros(2, 4, 16, 67, dtype=torch.float16)
    t = x[..., :64]  # rows 67 elements (134 bytes) apart
    a = _aligned_rows(t)
    assert torch.equal(a, t) and a.is_contiguous() and a.data_ptr() != t.data_ptr()
    ok = torch.zeros(2, 4, 16, 72, dtype=torch.float16)[..., :64]  # 144-byte rows: read in place
    assert _aligned_rows(ok) is ok
    shifted = torch.zeros(2 * 4 * 16 * 64 + 1, dtype=torch.float16)[1:].view(2, 4, 16, 64)  # pointer off by 2
    assert _aligned_rows(shifted).data_ptr() % 16 == 0
    shared = torch.zeros(1, 4, 16, 64, dtype=torch.float16).expand(2, 4, 16, 64)  # a stride-0 batch: aligned
    assert _aligned_rows(shared) is shared
