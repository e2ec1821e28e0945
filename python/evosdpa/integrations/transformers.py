"""evosdpa as a Hugging Face transformers attention backend: attn_implementation="evosdpa".

    import evosdpa.integrations.transformers as evosdpa_hf
    evosdpa_hf.register()  # once, before the model is built
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="evosdpa", dtype=torch.bfloat16)

Written against transformers 5.x (checked with 5.17). register() adds the attention function to
transformers' AttentionInterface and, for its mask, transformers' FlashAttention mask function
(AttentionMaskInterface): the function then receives either no mask (no padding in the keys it is given)
or the 2D padding mask [B, Lk] (True: a real token), never a 4D one, and applies the causal mask, the
sliding window and the softcap itself, as FlashAttention's backend does:
  * no mask: one dense evosdpa.attention call, causal aligned bottom-right (decode has Lq = 1 < Lk, a
    chunked prefill 1 < Lq < Lk), grouped-query heads read directly;
  * a padding mask: the batch unpadded into packed sequences (the keys of each row where the mask is
    True, its queries the last Lq columns of the mask), one evosdpa.attention_varlen call, and the
    result scattered back, padded query rows 0 (their values are never used);
  * a single packed sequence of several documents (B = 1, position_ids restarting at 0, no mask):
    attention_varlen over the documents, as transformers' FlashAttention path does.
sliding_window (the window's size W, the query's own key included) becomes window_size=(W - 1, 0);
softcap (Gemma 2's attn_logit_softcapping) and the model's scaling are passed through. Not served
(NotImplementedError): non-causal attention (bidirectional Gemma variants), attention sinks (s_aux),
dropout in training, and, like evosdpa's varlen and windowed calls, gradients.
"""
import torch

import evosdpa

NAME = "evosdpa"  # no "flash" in it: transformers would then look for the flash_attn package


def _window(sliding_window):
    return (int(sliding_window) - 1, 0) if sliding_window else (-1, -1)


def _varlen_from_mask(query, key, value, mask, scaling, window, softcap):
    """Attention of a batch with a 2D padding mask [B, Lm] (True: a token) through attention_varlen."""
    b, hq, lq, d = query.shape
    mask = mask.bool()
    lm = mask.shape[1]
    key, value = key[:, :, :lm], value[:, :, :lm]  # a static cache holds max_cache_len slots, Lm of them used
    q_mask = mask[:, -lq:]  # the new tokens are the last Lq columns of the mask
    k_rows = mask.reshape(-1).nonzero().squeeze(1)
    q_rows = q_mask.reshape(-1).nonzero().squeeze(1)
    len_k, len_q = mask.sum(1, dtype=torch.int32), q_mask.sum(1, dtype=torch.int32)
    cu_k = torch.nn.functional.pad(len_k.cumsum(0, dtype=torch.int32), (1, 0))
    cu_q = torch.nn.functional.pad(len_q.cumsum(0, dtype=torch.int32), (1, 0))
    k = key.transpose(1, 2).reshape(b * lm, key.shape[1], d)[k_rows]
    v = value.transpose(1, 2).reshape(b * lm, value.shape[1], value.shape[3])[k_rows]
    q = query.transpose(1, 2).reshape(b * lq, hq, d)[q_rows]
    o = evosdpa.attention_varlen(q, k, v, cu_q, cu_k, int(len_q.max()), int(len_k.max()), softmax_scale=scaling,
                                 causal=True, window_size=window, softcap=softcap)
    out = query.new_zeros(b * lq, hq, o.shape[-1])
    out[q_rows] = o
    return out.view(b, lq, hq, -1)


def _packed_documents(position_ids, b, lq, lk):
    """cu_seqlens (int32 [N + 1]) of the documents packed in one row, or None: B = 1, self-attention, and the
    positions restart (transformers' FlashAttention rule for a padding-free packed batch). A document starts
    at row 0 and wherever a position does not follow the one before: the first document's positions need
    not start at 0 (a row cut from a longer stream), which cu_seqlens from the zeros alone would leave out,
    its output rows unwritten."""
    if position_ids is None or b != 1 or lq != lk or lq < 2:
        return None
    pos = position_ids.reshape(-1)
    if pos.shape[0] != lq:
        return None
    restart = torch.ones_like(pos, dtype=torch.bool)
    restart[1:] = pos[1:] != pos[:-1] + 1
    if not bool(restart[1:].any()):
        return None
    starts = restart.nonzero().squeeze(1).to(torch.int32)
    return torch.cat([starts, starts.new_tensor([lq])])


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, sliding_window=None,
                      softcap=None, is_causal=None, **kwargs):
    """transformers' attention-function signature: query [B, Hq, Lq, D], key and value [B, Hkv, Lk, D]
    (the whole cache after this step's update), attention_mask None or 2D bool [B, Lm]; returns
    (output [B, Lq, Hq, D], None)."""
    if dropout and module.training:
        raise NotImplementedError("evosdpa: no attention dropout (set the model's attention_dropout to 0 or call "
                                  "model.eval())")
    if kwargs.get("s_aux") is not None:
        raise NotImplementedError("evosdpa: no attention sinks (s_aux)")
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    if not causal:
        raise NotImplementedError("evosdpa: the transformers backend runs causal attention only (bidirectional "
                                  "layers need a mask tensor, not supported yet)")
    if attention_mask is not None and attention_mask.dim() != 2:
        raise NotImplementedError(f"evosdpa: expected no mask or a 2D padding mask, got {tuple(attention_mask.shape)}: "
                                  "call evosdpa.integrations.transformers.register() before building the model")
    window = _window(sliding_window)
    softcap = float(softcap) if softcap else 0.0
    if attention_mask is not None:
        return _varlen_from_mask(query, key, value, attention_mask, scaling, window, softcap), None
    b, hq, lq, d = query.shape
    cu = _packed_documents(kwargs.get("position_ids"), b, lq, key.shape[2])
    if cu is not None:
        longest = int((cu[1:] - cu[:-1]).max())
        o = evosdpa.attention_varlen(query[0].transpose(0, 1), key[0].transpose(0, 1), value[0].transpose(0, 1), cu, cu,
                                     longest, longest, softmax_scale=scaling, causal=True, window_size=window,
                                     softcap=softcap)
        return o.unsqueeze(0), None
    o = evosdpa.attention(query, key, value, causal=True, causal_alignment="bottom_right", scale=scaling,
                          window_size=window, softcap=softcap)
    return o.transpose(1, 2).contiguous(), None


def register():
    """Add attn_implementation="evosdpa" to transformers (call before building the model). Registered in the
    interfaces' global mappings, so every model built afterwards, and set_attn_implementation, can use it."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask
    AttentionInterface.register(NAME, attention_forward)
    AttentionMaskInterface.register(NAME, flash_attention_mask)
