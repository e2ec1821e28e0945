"""Serving end to end: a small decoder-only transformer generates the same tokens through evosdpa's serving
path as through its dense path.

The model (defined here, seeded weights): vocabulary 512, d_model 256, 2 layers, 4 query heads and 2 K/V
heads of head_dim 64, RMSNorm, rotary positions, a SiLU MLP, fp16 weights and activations. Every matmul
outside attention is exactly rounded (float64 products and sums of the fp16 values, rounded to fp16 once),
so a token's activations do not depend on how many tokens share the GEMM: the two paths below differ in the
attention kernels only, and whatever separates their outputs is evosdpa's. The logits stay float32 (what a
sampler reads).

Path A (serving): the prompts (1, 17, 100, 300 and 513 tokens) packed into one batch and prefilled with
evosdpa.attention_varlen(causal=True), each layer's K and V written into a paged cache (pages of 16 keys,
shuffled across the sequences, an int32 block table [B, max_pages], unused slots NaN); then 64 greedy decode
steps for all sequences at once, each appending the new token's K and V to the cache (in torch, as a
serving engine does) and calling evosdpa.attention_with_kvcache(cache_seqlens=..., block_table=...,
causal=True).
Path B (dense): each sequence alone, every step recomputing the whole sequence with evosdpa.attention
(causal=True, top-left, [1, L, H, D]).

Asserted: every sequence's 65 tokens (the prefill's and 64 decode steps') are the same on both paths; at
every step the dense path's top-2 logit gap exceeds the largest difference between the two paths' logits,
so the same argmax is no accident of rounding; and the logits agree within LOGIT_TOLERANCE of their largest
magnitude. The weights and prompts come from a fixed seed (a CPU generator: the same on every machine),
chosen on the CPU with stand-ins for the kernels (float64 attention against the fused computation that
rounds P to fp16, accuracy.py's baseline): there every step's top-2 gap is at least 2.19 and at least 80
times the paths' logit difference at that step (at most 0.065, with max |logit| about 160)."""
import itertools
import math

from conftest import HAVE_TORCH, needs_gpu

pytestmark = needs_gpu

if HAVE_TORCH:
    import torch

import evosdpa

VOCAB, D_MODEL, LAYERS, HEADS_Q, HEADS_KV, HEAD_DIM, D_FFN = 512, 256, 2, 4, 2, 64, 512
PROMPTS = [1, 17, 100, 300, 513]
DECODE_STEPS = 64
PAGE = 16
SEED = 2
SCORE_STD = 8.0      # of the attention scores: most queries attend to one key, so a misplaced key shows
COPY_GAIN = 3.0      # of layer 0's head 0 in the residual stream; the other heads' (and layer 1's) is OTHER_GAIN
OTHER_GAIN = 0.5
LOGIT_STD = 10.0     # of the logits of a random hidden state (unit RMS)
ROPE_BASE = 10000.0
# The paths differ only where their attention kernels round (fp32 sums in different orders, P and O rounded to
# fp16): an fp16 rounding here and there of an activation, which the layers carry to the logits (on the CPU,
# stand-ins for two such kernels differ by about 2^-11 of max |logit|). A misread key moves a logit by about
# its standard deviation, 2^-3 of max |logit| or more.
LOGIT_TOLERANCE = 2.0**-8


class TinyDecoder:
    """The model; weights from a CPU generator seeded with `seed`, then moved to `device`.

    Random weights make random logits, whose top two are often nearly equal: a one-ulp difference between
    two correct attention kernels would then decide the greedy token now and then. So layer 0's head 0
    copies: its output enters the residual stream through an orthonormal map Q (times COPY_GAIN) and the
    unembedding of token t + 1 is Q applied to token t's value vector, so the successor of the token that
    head attends to (SCORE_STD makes that mostly one key) gets the largest logit by a wide margin. That
    choice rests on layer 0's scores, the same on both paths (the same exactly rounded q and k), so which
    token wins does not hinge on rounding, while it does on every key the head reads. Every other head,
    layer 1 and the MLP add their random share (OTHER_GAIN), so that all of them reach the logits."""

    def __init__(self, seed, device):
        g = torch.Generator().manual_seed(seed)

        def normal(*shape, std):
            return (torch.randn(shape, generator=g, dtype=torch.float64) * std).to(torch.float16)

        self.device = device
        self.embed = normal(VOCAB, D_MODEL, std=1.0)
        qk_std = math.sqrt(SCORE_STD) / math.sqrt(D_MODEL)  # q, k elements of std sqrt(SCORE_STD)
        self.layers = []
        for _ in range(LAYERS):
            self.layers.append({
                "wq": normal(D_MODEL, HEADS_Q * HEAD_DIM, std=qk_std),
                "wk": normal(D_MODEL, HEADS_KV * HEAD_DIM, std=qk_std),
                "wv": normal(D_MODEL, HEADS_KV * HEAD_DIM, std=1.0 / math.sqrt(D_MODEL)),
                "wo": normal(HEADS_Q * HEAD_DIM, D_MODEL, std=OTHER_GAIN / math.sqrt(HEADS_Q * HEAD_DIM)),
                "w1": normal(D_MODEL, D_FFN, std=1.0 / math.sqrt(D_MODEL)),
                "w2": normal(D_FFN, D_MODEL, std=OTHER_GAIN / math.sqrt(D_FFN)),
            })
        q_map = torch.linalg.qr(torch.randn(D_MODEL, HEAD_DIM, generator=g, dtype=torch.float64))[0]  # [256, 64]
        self.layers[0]["wo"][:HEAD_DIM] = (COPY_GAIN * q_map.T).to(torch.float16)
        values = self.embed.double() @ self.layers[0]["wv"][:, :HEAD_DIM].double()  # [VOCAB, 64]: head 0's
        unembed = (q_map @ values.T).roll(1, dims=1)  # [256, VOCAB]: token t + 1's column reads token t's copy
        # Scaled so that the logits of a random hidden state (unit RMS) have a standard deviation of LOGIT_STD.
        self.unembed = (unembed * (LOGIT_STD / math.sqrt(D_MODEL) / float(unembed.std()))).to(torch.float16)
        self.prompts = [torch.randint(VOCAB, (n,), generator=g).to(device) for n in PROMPTS]
        for w in self.layers:
            for name in w:
                w[name] = w[name].to(device)
        self.embed, self.unembed = self.embed.to(device), self.unembed.to(device)

    @staticmethod
    def linear(x, w):
        """x @ w exactly rounded: float64 (exact products of fp16 values, sums far below fp16's precision)."""
        return (x.double() @ w.double()).to(torch.float16)

    @staticmethod
    def rms_norm(x):
        x = x.double()
        return (x * torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + 1e-6)).to(torch.float16)

    @staticmethod
    def rope(x, positions):
        """Rotary positions on x [T, H, HEAD_DIM] (rotate-half pairs) for the tokens' `positions` [T]."""
        half = HEAD_DIM // 2
        freq = ROPE_BASE ** (-torch.arange(half, dtype=torch.float64, device=x.device) / half)
        angle = positions.double()[:, None, None] * freq
        x = x.double()
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * angle.cos() - x2 * angle.sin(), x2 * angle.cos() + x1 * angle.sin()], -1).half()

    def forward(self, tokens, positions, attend):
        """The hidden states [T, D_MODEL] of `tokens` at `positions`; attend(layer, q, k, v) computes attention
        of q [T, Hq, D] with k, v [T, Hkv, D] (the new tokens' keys and values) in the path's own way."""
        t = tokens.shape[0]
        x = self.embed[tokens]
        for i, w in enumerate(self.layers):
            h = self.rms_norm(x)
            q = self.rope(self.linear(h, w["wq"]).view(t, HEADS_Q, HEAD_DIM), positions)
            k = self.rope(self.linear(h, w["wk"]).view(t, HEADS_KV, HEAD_DIM), positions)
            v = self.linear(h, w["wv"]).view(t, HEADS_KV, HEAD_DIM)
            x = x + self.linear(attend(i, q, k, v).reshape(t, HEADS_Q * HEAD_DIM), w["wo"])
            h = self.rms_norm(x)
            x = x + self.linear(torch.nn.functional.silu(self.linear(h, w["w1"]).double()).half(), w["w2"])
        return x

    def logits(self, x):
        return (self.rms_norm(x).double() @ self.unembed.double()).float()


class PagedCache:
    """A paged K/V cache per layer, [num_pages, PAGE, Hkv, D], and the int32 block table [B, max_pages] of
    pages shuffled across the sequences (a spare page that no sequence owns, too)."""

    def __init__(self, lengths, capacity, device, seed):
        g = torch.Generator().manual_seed(seed)
        batch, max_pages = len(lengths), -(-capacity // PAGE)
        num_pages = batch * max_pages + 3
        self.table = torch.randperm(num_pages, generator=g)[: batch * max_pages].view(batch, max_pages)
        self.table = self.table.to(torch.int32).to(device)
        shape = (num_pages, PAGE, HEADS_KV, HEAD_DIM)
        self.k = [torch.full(shape, math.nan, dtype=torch.float16, device=device) for _ in range(LAYERS)]
        self.v = [torch.full(shape, math.nan, dtype=torch.float16, device=device) for _ in range(LAYERS)]

    def write(self, layer, seq, positions, k, v):
        """Key/value row i goes to sequence seq[i]'s position positions[i]."""
        page = self.table[seq, positions // PAGE].long()
        self.k[layer][page, positions % PAGE] = k
        self.v[layer][page, positions % PAGE] = v


def top2_gap(logits):
    top = logits.topk(2, dim=-1).values
    return top[..., 0] - top[..., 1]


def serve(model, attention_varlen, attention_with_kvcache):
    """Path A: [B, 1 + DECODE_STEPS] tokens and the float32 logits [B, 1 + DECODE_STEPS, VOCAB] they came from."""
    device = model.device
    lengths = [p.shape[0] for p in model.prompts]
    batch = len(lengths)
    cache = PagedCache(lengths, max(lengths) + DECODE_STEPS + 1, device, seed=SEED + 1)
    tokens = torch.cat(model.prompts)
    seq = torch.cat([torch.full((n,), b, device=device) for b, n in enumerate(lengths)])
    positions = torch.cat([torch.arange(n, device=device) for n in lengths])
    cu_seqlens = torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int32, device=device)

    def prefill_attend(layer, q, k, v):
        cache.write(layer, seq, positions, k, v)
        return attention_varlen(q, k, v, cu_seqlens, cu_seqlens, max(lengths), max(lengths), causal=True)

    x = model.forward(tokens, positions, prefill_attend)
    logits = [model.logits(x[cu_seqlens[1:].long() - 1])]
    rows = torch.arange(batch, device=device)
    lens = torch.tensor(lengths, device=device)  # tokens in the cache
    for _ in range(DECODE_STEPS):
        new = logits[-1].argmax(dim=-1)
        seqlens = (lens + 1).to(torch.int32)

        def decode_attend(layer, q, k, v):
            cache.write(layer, rows, lens, k, v)  # the caller appends the new token's K and V, then attends
            out = attention_with_kvcache(q[:, None], cache.k[layer], cache.v[layer], cache_seqlens=seqlens,
                                         block_table=cache.table, causal=True)
            return out[:, 0]

        logits.append(model.logits(model.forward(new, lens, decode_attend)))
        lens = lens + 1
    logits = torch.stack(logits, dim=1)
    return logits.argmax(dim=-1), logits


def dense(model, attention):
    """Path B: the same, each sequence alone, recomputing it whole every step with dense causal attention."""
    tokens, all_logits = [], []

    def attend(layer, q, k, v):
        return attention(q[None], k[None], v[None], causal=True, layout="bshd")[0]

    for prompt in model.prompts:
        seq, logits = prompt, []
        for _ in range(1 + DECODE_STEPS):
            positions = torch.arange(seq.shape[0], device=model.device)
            logits.append(model.logits(model.forward(seq, positions, attend)[-1]))
            seq = torch.cat([seq, logits[-1].argmax()[None]])
        tokens.append(seq[prompt.shape[0]:])
        all_logits.append(torch.stack(logits))
    return torch.stack(tokens), torch.stack(all_logits)


def compare(tokens_a, logits_a, tokens_b, logits_b):
    """The assertions of the module docstring; returns (min top-2 gap, max |logits difference|) for reports."""
    diff = (logits_a - logits_b).abs()
    gap = top2_gap(logits_b)
    for b, n in enumerate(PROMPTS):
        mismatch = (tokens_a[b] != tokens_b[b]).nonzero()
        first = int(mismatch[0]) if mismatch.numel() else None
        assert first is None, (
            f"prompt {b} ({n} tokens): the serving path's token {first} is {int(tokens_a[b, first])}, the dense "
            f"path's {int(tokens_b[b, first])} (top-2 gap there {float(gap[b, first]):.4g}, logits differ by up to "
            f"{float(diff[b, first].max()):.4g})")
    step_diff = diff.amax(dim=-1)
    near = (gap <= step_diff).nonzero()
    assert near.numel() == 0, (
        f"{near.shape[0]} steps' top-2 gap is not above the paths' logit difference there, e.g. prompt "
        f"{int(near[0, 0])} step {int(near[0, 1])}: gap {float(gap[tuple(near[0])]):.4g}, difference "
        f"{float(step_diff[tuple(near[0])]):.4g}")
    tolerance = LOGIT_TOLERANCE * float(logits_b.abs().max())
    assert float(diff.max()) <= tolerance, (
        f"the paths' logits differ by up to {float(diff.max()):.4g} > {tolerance:.4g} (2^-8 of max |logit|)")
    return float(gap.min()), float(diff.max())


def test_paged_serving_generates_the_dense_tokens():
    model = TinyDecoder(SEED, "cuda")
    with torch.inference_mode():
        tokens_a, logits_a = serve(model, evosdpa.attention_varlen, evosdpa.attention_with_kvcache)
        tokens_b, logits_b = dense(model, evosdpa.attention)
    assert tokens_a.shape == tokens_b.shape == (len(PROMPTS), 1 + DECODE_STEPS)
    min_gap, max_diff = compare(tokens_a, logits_a, tokens_b, logits_b)
    tolerance = LOGIT_TOLERANCE * float(logits_b.abs().max())
    print(f"{tokens_a.numel()} tokens match; smallest top-2 gap {min_gap:.4g} (2.19 on the CPU), largest logit "
          f"difference between the paths {max_diff:.4g} (tolerance {tolerance:.4g})")
