"""evosdpa: fused scaled-dot-product attention, forward and backward, on NVIDIA tensor cores.

    import evosdpa
    out = evosdpa.attention(q, k, v, causal=True)                       # [B, H, L, D] CUDA tensors
    out = evosdpa.scaled_dot_product_attention(q, k, v, is_causal=True)  # PyTorch's signature, (..., L, E)
    out.sum().backward()                                                 # dq, dk, dv: the fused backward
    q8, qd = evosdpa.quantize_fp8(q)                                     # FP8 (E4M3) and its descale
    out = evosdpa.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens,  # decoding: a KV cache,
                                         block_table=pages, causal=True)           # dense or paged
    out = evosdpa.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k,  # sequences packed without padding,
                                   max_seqlen_q, max_seqlen_k, causal=True)  # [total, H, D]

Both functions are differentiable (fp16/bf16 inputs): evosdpa.attention(..., deterministic=True), the
default, gives bitwise repeatable gradients, deterministic=False a faster dQ summed with atomics.
attention_with_kvcache (inference only: no backward pass) reads a KV cache with per-sequence lengths,
dense or paged, with split-KV decoding; attention_varlen (inference only too) a batch of sequences of
different lengths packed one after another (FlashAttention's varlen convention), e.g. a serving prefill.

`import evosdpa` needs neither PyTorch nor a GPU. The `torch.ops.evosdpa.attention_fwd`,
`attention_bwd`, `attention_kvcache` and `attention_varlen` custom ops are registered at import when
PyTorch is already imported, else when a tensor function is first looked up (which imports PyTorch).
"""
import sys

from ._lib import EvosdpaError, kernel_names, library_path
from ._lib import version as library_version

__version__ = "0.9.0"
__all__ = ["attention", "scaled_dot_product_attention", "attention_with_kvcache", "attention_varlen", "quantize_fp8",
           "kernel_names", "library_path", "library_version", "EvosdpaError"]

_TORCH_API = ("attention", "scaled_dot_product_attention", "attention_with_kvcache", "attention_varlen",
              "quantize_fp8")


def __getattr__(name):
    if name in _TORCH_API:
        try:
            from . import torch_ops
        except ImportError as e:
            raise ImportError(f"evosdpa.{name} needs PyTorch ({e})") from e
        return getattr(torch_ops, name)
    raise AttributeError(f"module 'evosdpa' has no attribute '{name}'")


if "torch" in sys.modules:  # PyTorch is loaded anyway: register the op now, so torch.ops.evosdpa works at once
    try:
        from . import torch_ops  # noqa: F401
    except ImportError:
        pass  # the tensor functions report it when first looked up
