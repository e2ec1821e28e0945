"""Random calls of the serving entry points against float64, for fuzz_attention.py (`--what kvcache` or
`--what varlen`, with `--replay SEED` to run one call alone).

kvcache (evosdpa.attention_with_kvcache): 1-8 sequences of cache lengths of their own (0, odd, up to ~20k),
1 new query mostly (up to 300 now and then), grouped heads, a dense cache or a paged one (pages of 16 to 512
keys, 48 included, distinct and shuffled in a larger pool; now and then a hole, an out-of-range entry among a
sequence's pages, whose keys count as masked), lengths as an int32 tensor (a value outside [0, capacity] now
and then: clamped), an int or None, causal (bottom-right per sequence) or not, scales, num_splits 0 (the
library's choice), 1 or N, the lse, a heads-outermost q with K and V interleaved in one buffer.
varlen (evosdpa.attention_varlen): 1-12 packed sequences with query and key lengths of their own (0, 1, odd,
up to ~2,000), grouped heads, no mask, the function's bottom-right causal mask or the op's top-left one,
seqused_k, max_seqlen_q/k at or above the true maxima (smaller ones cut sequences), the packed tensors plain,
among padding heads and columns, slices of one fused QKV buffer or misaligned, padding rows after the last.

Whatever no sequence may read (cache slots past a length, spare pages, holes, keys past seqused_k, padding
rows, heads and columns) holds a poison drawn per call, NaN or 2^14, so that reading it shows. Each sequence
is judged alone by accuracy.check_attention over the keys it sees, and its rows that see no key must be
exactly 0. Every call runs "auto" and one named kernel, skipped when it refuses the call (ValueError)."""
import itertools
import math
import random

import torch

import evosdpa
from accuracy import check_attention, visible_mask
from conftest import Rng
from evosdpa import _lib
from fuzz_attention import DTYPES, length

# Keep the float64 reference (the sum over sequences of Hq * Lq * keys seen) within a few hundred MB.
MAX_SCORES = 20_000_000
PAGE_SIZES = (16, 16, 32, 48, 64, 128, 256, 512)  # positive multiples of 16, the API's rule; vLLM's 16 most


def common(r):
    """What both fuzzers draw alike, from random.Random r."""
    hkv = r.randint(1, 8)
    return dict(dtype=r.choice(DTYPES), d=r.choice((64, 128)), hkv=hkv, hq=hkv * r.randint(1, 8),
                scale=r.choices((None, round(r.uniform(-1.0, 1.0), 3), 0.0, 2.0), (6, 2, 1, 1))[0],
                lse=r.random() < 0.5, kernel=r.choice(evosdpa.kernel_names()), poison=r.choice((math.nan, 2.0**14)))


def describe(c):
    """The configuration on one line, for failure messages."""
    return " ".join(f"{k}={v}".replace("torch.", "").replace(" ", "") for k, v in c.items())


def ceil_div(a, b):
    return -(-a // b)


def seq_length(r):
    """Queries or keys of one packed sequence: empty 1 in 10, else fuzz_attention's lengths (1 to 2100)."""
    return 0 if r.random() < 0.1 else length(r)


def cache_length(r):
    """Keys of one sequence in a KV cache: empty, decoding-short to a few thousand (fuzz_attention's), long."""
    band = r.random()
    return 0 if band < 0.1 else length(r) if band < 0.75 else r.randint(2101, 20000)


def draw_kvcache(r):
    """One attention_with_kvcache call's configuration."""
    while True:
        c = common(r)
        c["b"], c["lq"] = r.randint(1, 8), r.choices((1, r.randint(2, 16), r.randint(17, 300)), (6, 3, 1))[0]
        c["page"] = r.choice(PAGE_SIZES) if r.random() < 0.6 else None  # None: a dense cache [B, cap, Hkv, D]
        lens = [cache_length(r) for _ in range(c["b"])]
        room = max(lens) + r.choice((0, r.randint(1, 300)))  # slots past the longest sequence, or none
        c["cap"] = room if c["page"] is None else ceil_div(room, c["page"]) * c["page"]  # keys a sequence can have
        c["form"] = r.choices(("tensor", "int", "none"), (8, 1, 1))[0]  # how cache_seqlens is passed
        if c["form"] != "tensor":  # one length for all; None: all cap keys
            lens = [lens[0] if c["form"] == "int" else c["cap"]] * c["b"]
        c["wild"] = None  # (sequence, value outside [0, cap] passed for it): clamped by the kernel
        if c["form"] == "tensor" and r.random() < 0.1:
            c["wild"] = (r.randrange(c["b"]), r.choice((-r.randint(1, 99), c["cap"] + r.randint(1, 999), 2**31 - 1)))
            lens[c["wild"][0]] = min(max(c["wild"][1], 0), c["cap"])
        c["lens"] = lens
        if sum(c["hq"] * c["lq"] * n for n in lens) <= MAX_SCORES:
            break
    c["causal"] = r.random() < 0.6
    c["splits"] = r.choices((0, 1, r.randint(2, 8), r.randint(9, 64)), (5, 2, 2, 1))[0]
    c["view"] = r.choices(("plain", "strided"), (7, 3))[0]
    c["hole"] = c["page"] is not None and r.random() < 0.15
    return c


def check_sequence(out, q, k, v, lse, causal, alignment, scale, rng, what, hidden=None):
    """One sequence: out, q [Hq, Lq, D], k, v [Hkv, Lk, D] (the keys it sees, hidden ones masked), lse [Hq, Lq]
    or None, under the accuracy rule; O exactly 0 on the rows that see no key."""
    keep = None if hidden is None else ~hidden
    check_attention(out, q, k, v, causal=causal, alignment=alignment, scale=scale, lse=lse, rng=rng, what=what,
                    mask=keep)
    visible = visible_mask(q.shape[-2], k.shape[-2], causal, alignment, q.device)
    no_key = ~(visible if keep is None else visible & keep).any(dim=1)
    assert not out[:, no_key].ne(0).any(), f"{what}: O is not exactly 0 on the {int(no_key.sum())} rows that see no key"


def each_kernel(seed, c, call, check):
    """call(kernel) -> (O, lse or None), then check(O, lse), on "auto" and the drawn kernel; a named kernel that
    refuses the call with ValueError is skipped. Returns the failures."""
    failures = []
    for kernel in dict.fromkeys(("auto", c["kernel"])):
        try:
            out, lse = call(kernel)
        except (ValueError, evosdpa.EvosdpaError) as e:
            if kernel != "auto" and isinstance(e, ValueError):
                continue  # a named kernel that does not take this call ("auto" ran it, first)
            failures.append(f"seed {seed} {kernel}: raised {type(e).__name__}: {e}\n  {describe(c)}")
            continue
        try:
            torch.cuda.synchronize()
            check(out, lse)
        except AssertionError as e:
            failures.append(f"seed {seed} {kernel}: {e}")
    return failures


def run_kvcache(seed):
    """Draw an attention_with_kvcache call from `seed`, run and check it; returns the failures."""
    r = random.Random(seed)
    c = draw_kvcache(r)
    rng, desc, poison = Rng(seed), describe(c), c["poison"]
    dev, dt, b, lq, hq, hkv, d, page, lens = (rng.device, c["dtype"], c["b"], c["lq"], c["hq"], c["hkv"], c["d"],
                                              c["page"], c["lens"])
    q = rng.randn(b, lq, hq, d, dtype=dt)
    hole = None  # (sequence, table column) of an out-of-range entry among a sequence's pages
    if page is None:
        k_cache, v_cache = rng.randn(b, c["cap"], hkv, d, dtype=dt), rng.randn(b, c["cap"], hkv, d, dtype=dt)
        for i, n in enumerate(lens):
            k_cache[i, n:] = v_cache[i, n:] = poison
        table = None
    else:
        blocks = c["cap"] // page
        num_pages = b * blocks + r.randint(1, 8)  # spare pages that no sequence owns
        order = r.sample(range(num_pages), b * blocks)
        pages = [order[i * blocks:(i + 1) * blocks] for i in range(b)]
        rows = [list(p) for p in pages]  # the table as passed
        # Entries past a sequence's pages are never read: each a spare page (poisoned) or out of range.
        for i, n in enumerate(lens):
            for j in range(ceil_div(n, page), blocks):
                rows[i][j] = rows[i][j] if r.random() < 0.5 else r.choice((-1, num_pages + j, 2**31 - 1))
        owners = [i for i, n in enumerate(lens) if n]
        if c["hole"] and owners:
            i = r.choice(owners)
            hole = (i, r.randrange(ceil_div(lens[i], page)))
            rows[i][hole[1]] = r.choice((-1, num_pages))
        used = torch.zeros(num_pages, page, dtype=torch.bool, device=dev)  # the slots some sequence reads
        for i, n in enumerate(lens):
            first = torch.tensor(pages[i], dtype=torch.long, device=dev)[:, None] * page
            used.view(-1)[(first + torch.arange(page, device=dev)).flatten()[:n]] = True
        if hole is not None:
            used[pages[hole[0]][hole[1]]] = False
        k_cache, v_cache = rng.randn(num_pages, page, hkv, d, dtype=dt), rng.randn(num_pages, page, hkv, d, dtype=dt)
        k_cache[~used] = v_cache[~used] = poison
        table = torch.tensor(rows, dtype=torch.int32, device=dev).reshape(b, blocks)
    q_in, k_in, v_in = q, k_cache, v_cache
    if c["view"] == "strided":  # q heads-outermost; K and V interleaved in one [..., 2, Hkv, D] buffer
        q_in = q.transpose(1, 2).contiguous().transpose(1, 2)
        kv = torch.stack((k_cache, v_cache), dim=-3)
        k_in, v_in = kv[..., 0, :, :], kv[..., 1, :, :]
    seqlens = None if c["form"] == "none" else lens[0]
    if c["form"] == "tensor":
        passed = list(lens)
        if c["wild"] is not None:
            passed[c["wild"][0]] = c["wild"][1]
        seqlens = torch.tensor(passed, dtype=torch.int32, device=dev)

    def call(kernel):
        res = evosdpa.attention_with_kvcache(q_in, k_in, v_in, cache_seqlens=seqlens, block_table=table,
                                             softmax_scale=c["scale"], causal=c["causal"], num_splits=c["splits"],
                                             return_softmax_lse=c["lse"], kernel=kernel)
        return res if c["lse"] else (res, None)

    def check(out, lse):
        for i, n in enumerate(lens):
            # Sequence i's keys: its first n slots, through its pages (as the table had them before any hole).
            if page is None:
                k, v = k_cache[i, :n], v_cache[i, :n]
            else:
                idx = torch.tensor(pages[i][:ceil_div(n, page)], dtype=torch.long, device=dev)
                k, v = k_cache[idx].flatten(0, 1)[:n], v_cache[idx].flatten(0, 1)[:n]
            hidden = None
            if hole is not None and hole[0] == i:
                hidden = torch.zeros(n, dtype=torch.bool, device=dev)
                hidden[hole[1] * page:(hole[1] + 1) * page] = True
                # The hole's page is poisoned: zeros, so that the reference's 0 * NaN does not turn into NaN.
                k, v = k.masked_fill(hidden[:, None, None], 0), v.masked_fill(hidden[:, None, None], 0)
            check_sequence(out[i].transpose(0, 1), q[i].transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                           None if lse is None else lse[i], c["causal"], "bottom_right", c["scale"], rng,
                           f"sequence {i} ({lq} queries, {n} keys): {desc}", hidden)

    return each_kernel(seed, c, call, check)


def draw_varlen(r):
    """One attention_varlen call's configuration."""
    while True:
        c = common(r)
        c["lq"] = [seq_length(r) for _ in range(r.randint(1, 12))]
        # Self-attention over packed prompts (equal lengths) 4 in 10, else key sequences of their own length.
        c["lk"] = list(c["lq"]) if r.random() < 0.4 else [seq_length(r) for _ in c["lq"]]
        if sum(c["hq"] * a * n for a, n in zip(c["lq"], c["lk"])) <= MAX_SCORES:
            break
    c["causal"] = r.choices((None, "bottom_right", "top_left"), (4, 4, 2))[0]
    c["used"] = None  # seqused_k: a sequence sees its first min(len_k, max(used, 0)) keys
    if r.random() < 0.25:
        c["used"] = [r.choice((-r.randint(1, 5), r.randint(0, n), n, n + r.randint(1, 50))) for n in c["lk"]]
    c["extra"] = [r.choice((0, 0, 0, r.randint(1, 600))) for _ in range(2)]  # max_seqlen_q, _k above the maxima
    c["pad"] = r.choice((0, 0, r.randint(1, 40)))  # rows of q, k and v past the last sequence
    c["view"] = r.choices(("plain", "padded", "fused", "misaligned"), (4, 2, 2 if c["lk"] == c["lq"] else 0, 1))[0]
    return c


def packed_view(t, how, poison):
    """t [rows, H, D] as the call's input: as it is, in a buffer with a poisoned head on either side and 8
    poisoned columns after each head (strides 16-byte aligned), or misaligned: heads D + 1 apart, 2 bytes off."""
    if how == "plain":
        return t
    pad = (2, 8) if how == "padded" else (0, 1)
    big = torch.full((t.shape[0], t.shape[1] + pad[0], t.shape[2] + pad[1]), poison, dtype=t.dtype, device=t.device)
    view = big[:, pad[0] // 2:pad[0] // 2 + t.shape[1], :t.shape[2]] if how == "padded" else big[..., 1:]
    view.copy_(t)
    return view


def run_varlen(seed):
    """Draw an attention_varlen call from `seed`, run and check it; returns the failures."""
    r = random.Random(seed)
    c = draw_varlen(r)
    rng, desc, poison = Rng(seed), describe(c), c["poison"]
    dev, dt, hq, hkv, d = rng.device, c["dtype"], c["hq"], c["hkv"], c["d"]
    seen = c["lk"] if c["used"] is None else [min(n, max(u, 0)) for n, u in zip(c["lk"], c["used"])]
    cu_q, cu_k = list(itertools.accumulate(c["lq"], initial=0)), list(itertools.accumulate(c["lk"], initial=0))
    q = rng.randn(cu_q[-1] + c["pad"], hq, d, dtype=dt)
    k, v = rng.randn(cu_k[-1] + c["pad"], hkv, d, dtype=dt), rng.randn(cu_k[-1] + c["pad"], hkv, d, dtype=dt)
    q[cu_q[-1]:] = poison
    for t in (k, v):
        t[cu_k[-1]:] = poison
        for start, end, n in zip(cu_k, cu_k[1:], seen):
            t[start + n:end] = poison  # keys past seqused_k
    if c["view"] == "fused":  # one QKV projection's output [rows, Hq + 2 Hkv, D] (equal rows: self-attention)
        q_in, k_in, v_in = torch.cat((q, k, v), dim=1).split((hq, hkv, hkv), dim=1)
    else:
        q_in, k_in, v_in = (packed_view(t, c["view"], poison) for t in (q, k, v))
    cu_q_t, cu_k_t = (torch.tensor(x, dtype=torch.int32, device=dev) for x in (cu_q, cu_k))
    used = None if c["used"] is None else torch.tensor(c["used"], dtype=torch.int32, device=dev)
    max_q, max_k = max(c["lq"]) + c["extra"][0], max(c["lk"]) + c["extra"][1]
    causal, alignment = c["causal"] is not None, c["causal"] or "bottom_right"

    def call(kernel):
        if c["causal"] == "top_left":  # the op's alignment (the function's causal is bottom-right)
            scale = math.nan if c["scale"] is None else c["scale"]
            out, lse = torch.ops.evosdpa.attention_varlen(q_in, k_in, v_in, cu_q_t, cu_k_t, used, max_q, max_k,
                                                          _lib.CAUSAL_TOP_LEFT, scale, c["lse"], kernel)
            return out, lse if c["lse"] else None
        res = evosdpa.attention_varlen(q_in, k_in, v_in, cu_q_t, cu_k_t, max_q, max_k, softmax_scale=c["scale"],
                                       causal=causal, return_softmax_lse=c["lse"], seqused_k=used, kernel=kernel)
        return res if c["lse"] else (res, None)

    def check(out, lse):
        # Rows past the last sequence are left unwritten (the docstring): only each sequence's rows are read.
        for i, (qs, lq, ks, n) in enumerate(zip(cu_q, c["lq"], cu_k, seen)):
            rows = slice(qs, qs + lq)
            check_sequence(out[rows].transpose(0, 1), q[rows].transpose(0, 1), k[ks:ks + n].transpose(0, 1),
                           v[ks:ks + n].transpose(0, 1), None if lse is None else lse[:, rows], causal, alignment,
                           c["scale"], rng, f"sequence {i} ({lq} queries, {n} keys): {desc}")

    return each_kernel(seed, c, call, check)
