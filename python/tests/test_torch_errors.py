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
        yield lambda *shape, dtype=torch.float16: torch.empty(*shape, dtype=dtype, device="cuda")


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
    with pytest.raises(NotImplementedError, match="attn_mask"):
        evosdpa.scaled_dot_product_attention(q, k, v, attn_mask=meta(16, 16))
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
