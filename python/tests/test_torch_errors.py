"""Bad input raises TypeError/ValueError/NotImplementedError naming the problem; needs PyTorch, no GPU."""
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
    (lambda: (meta(2, 4, 64, 16).transpose(-1, -2),) * 3, ValueError, "contiguous last dimension"),
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
    with pytest.raises(ValueError, match="scale"):
        evosdpa.attention(q, k, v, scale=float("nan"))
    with pytest.raises(TypeError, match="kernel"):
        evosdpa.attention(q, k, v, kernel=3)


def test_sdpa_unsupported_arguments_are_named():
    q, k, v = qkv()
    with pytest.raises(NotImplementedError, match="attn_mask"):
        evosdpa.scaled_dot_product_attention(q, k, v, attn_mask=meta(16, 16))
    with pytest.raises(NotImplementedError, match="dropout_p"):
        evosdpa.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
    with pytest.raises(NotImplementedError, match="4-D"):
        evosdpa.scaled_dot_product_attention(meta(1, 2, 3, 16, 64), meta(1, 2, 3, 16, 64), meta(1, 2, 3, 16, 64))
    with pytest.raises(NotImplementedError, match="value head dim"):
        evosdpa.scaled_dot_product_attention(q, k, meta(2, 4, 16, 128))
    with pytest.raises(ValueError, match="enable_gqa"):
        evosdpa.scaled_dot_product_attention(q, meta(2, 2, 16, 64), meta(2, 2, 16, 64))
