"""evosdpa as transformers' attention backend (evosdpa.integrations.transformers): random-weight Llama
(grouped-query heads), Mistral (sliding window) and Gemma 2 (sliding window on alternate layers, softcap,
its own scaling) models defined here, no downloads, in float16 on a GPU. Each evosdpa model shares its
weights with a model on transformers' own attention (sdpa; eager for Gemma 2, whose softcap sdpa
ignores): the logits of a padded batch (left and right padding) agree at the real tokens, and greedy
generate() from a left-padded batch gives the same tokens. Skipped without transformers or a GPU."""
import copy
import importlib.util

import pytest

from conftest import HAVE_TORCH, needs_gpu

HAVE_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
pytestmark = [needs_gpu, pytest.mark.skipif(not HAVE_TRANSFORMERS, reason="transformers is not installed")]

if HAVE_TORCH and HAVE_TRANSFORMERS:
    import torch
    import transformers

    import evosdpa.integrations.transformers as evosdpa_hf

VOCAB = 97
SMALL = dict(vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=3, num_attention_heads=4,
             num_key_value_heads=2, head_dim=64, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def configs():
    return {
        "llama": (transformers.LlamaConfig(**SMALL), "sdpa"),
        "mistral": (transformers.MistralConfig(**SMALL, sliding_window=5), "sdpa"),
        # A softcap small enough to cap these small random logits, so that getting it wrong shows.
        "gemma2": (transformers.Gemma2Config(**SMALL, query_pre_attn_scalar=64, sliding_window=5,
                                             attn_logit_softcapping=0.05, final_logit_softcapping=None), "eager"),
    }


def models(name):
    """(reference model, evosdpa model), the same weights, float16 on the GPU, eval mode."""
    evosdpa_hf.register()
    cfg, ref_impl = configs()[name]
    torch.manual_seed(0)
    # from_config writes the implementation into the config it is given: a copy each.
    ref = transformers.AutoModelForCausalLM.from_config(copy.deepcopy(cfg), attn_implementation=ref_impl)
    mine = transformers.AutoModelForCausalLM.from_config(copy.deepcopy(cfg), attn_implementation="evosdpa")
    mine.load_state_dict(ref.state_dict())
    assert ref.config._attn_implementation == ref_impl and mine.config._attn_implementation == "evosdpa"
    return (m.to(device="cuda", dtype=torch.float16).eval() for m in (ref, mine))


def padded_batch(lengths, side, generator):
    """input_ids and attention_mask [B, max(lengths)], padded with token 0 on `side`."""
    longest = max(lengths)
    ids = torch.zeros(len(lengths), longest, dtype=torch.long)
    mask = torch.zeros(len(lengths), longest, dtype=torch.long)
    for i, n in enumerate(lengths):
        cols = slice(longest - n, longest) if side == "left" else slice(0, n)
        ids[i, cols] = torch.randint(3, VOCAB, (n,), generator=generator)
        mask[i, cols] = 1
    return ids.cuda(), mask.cuda()


def logits_error(ref, mine, ids, mask):
    """(max |logits - reference logits| at the real tokens, what is allowed): two float16 models whose
    attention rounds differently, the residual stream's float16 rounding (2^-11) over three layers a few
    times over."""
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).logits.float()
        got = mine(input_ids=ids, attention_mask=mask).logits.float()
    real = mask.bool()
    return (got - want)[real].abs().max().item(), 1e-2 * want[real].abs().max().item() + 1e-3


@pytest.mark.parametrize("name", ["llama", "mistral", "gemma2"])
@pytest.mark.parametrize("side", ["left", "right", "none"])
def test_logits_match(name, side, monkeypatch):
    ref, mine = models(name)
    calls = {"attention": 0, "attention_varlen": 0}  # which of evosdpa's calls the backend made
    for fn in calls:
        def counted(*args, _fn=getattr(evosdpa_hf.evosdpa, fn), _name=fn, **kwargs):
            calls[_name] += 1
            return _fn(*args, **kwargs)
        monkeypatch.setattr(evosdpa_hf.evosdpa, fn, counted)
    gen = torch.Generator().manual_seed(1)
    ids, mask = padded_batch([14, 14, 14] if side == "none" else [14, 9, 3], "left" if side == "none" else side, gen)
    err, tol = logits_error(ref, mine, ids, mask)
    assert err <= tol, f"{name}, {side} padding: max |logits - reference| {err:.3g} > {tol:.3g}"
    layers = mine.config.num_hidden_layers
    assert calls == ({"attention": layers, "attention_varlen": 0} if side == "none"
                     else {"attention": 0, "attention_varlen": layers}), calls


def test_the_check_catches_a_missing_softcap():
    """transformers' sdpa backend ignores Gemma 2's softcap: the logits check above must fail on it."""
    evosdpa_hf.register()
    ref, _ = models("gemma2")
    cfg, _ = configs()["gemma2"]
    sdpa = transformers.AutoModelForCausalLM.from_config(copy.deepcopy(cfg), attn_implementation="sdpa")
    sdpa.load_state_dict(ref.state_dict())
    sdpa = sdpa.to(device="cuda", dtype=torch.float16).eval()
    ids, mask = padded_batch([14, 9, 3], "left", torch.Generator().manual_seed(1))
    err, tol = logits_error(ref, sdpa, ids, mask)
    assert err > tol, f"without the softcap the logits moved only {err:.3g} (allowed {tol:.3g})"


@pytest.mark.parametrize("name", ["llama", "mistral", "gemma2"])
def test_generate_matches(name):
    ref, mine = models(name)
    ids, mask = padded_batch([11, 6, 2], "left", torch.Generator().manual_seed(2))
    kw = dict(max_new_tokens=24, do_sample=False, pad_token_id=0, eos_token_id=None)
    with torch.no_grad():
        want = ref.generate(input_ids=ids, attention_mask=mask, **kw)
        got = mine.generate(input_ids=ids, attention_mask=mask, **kw)
    assert torch.equal(got, want), f"{name}: generated tokens differ\n{got}\n{want}"


def test_unsupported_calls_are_named():
    _, mine = models("llama")
    layer = mine.model.layers[0].self_attn
    q = torch.ones(1, 4, 8, 64, dtype=torch.float16, device="cuda")
    k = torch.ones(1, 2, 8, 64, dtype=torch.float16, device="cuda")
    with pytest.raises(NotImplementedError, match="causal"):
        evosdpa_hf.attention_forward(layer, q, k, k, None, is_causal=False)
    with pytest.raises(NotImplementedError, match="2D padding mask"):
        evosdpa_hf.attention_forward(layer, q, k, k, torch.ones(1, 1, 8, 8, dtype=torch.bool, device="cuda"))


def test_packed_documents_from_any_first_position():
    """A padding-free packed row (B = 1, position_ids restarting per document): every document attends
    causally within itself, the first one too when its positions do not start at 0 (a row cut from a longer
    stream: cu_seqlens from the zeros alone left its rows out, unwritten)."""
    _, mine = models("llama")
    layer = mine.model.layers[0].self_attn
    g = torch.Generator(device="cuda").manual_seed(3)
    lengths, firsts = [5, 7, 4], [3, 0, 0]
    pos = torch.cat([torch.arange(f, f + n) for f, n in zip(firsts, lengths)]).view(1, -1).cuda()
    L = pos.shape[1]
    q = torch.randn(1, 4, L, 64, generator=g, device="cuda").half()
    k, v = (torch.randn(1, 2, L, 64, generator=g, device="cuda").half() for _ in range(2))
    out, _ = evosdpa_hf.attention_forward(layer, q, k, v, None, scaling=0.125, position_ids=pos)
    start = 0
    for n in lengths:
        rows = slice(start, start + n)
        want = torch.nn.functional.scaled_dot_product_attention(q[:, :, rows].float(), k[:, :, rows].float(),
                                                                v[:, :, rows].float(), is_causal=True, scale=0.125,
                                                                enable_gqa=True)
        got = out[:, rows].transpose(1, 2).float()
        assert (got - want).abs().max().item() < 2e-3, f"document at rows {rows}"
        start += n

