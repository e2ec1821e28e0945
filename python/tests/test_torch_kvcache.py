"""A KV cache (C ABI 0.5): evosdpa.attention_with_kvcache and the op evosdpa::attention_kvcache.

On a GPU, against a float64 reference written here, sequence by sequence: each sequence's keys and
values are gathered from the cache in Python (page by page through the block table for a paged cache),
the length and the bottom-right causal mask are built from each new token's position in its sequence,
and the softmax is taken in float64. Outputs are judged by the library's accuracy rule (accuracy.py: the
fused baseline of the same sequence sets the tolerance). Dense and paged caches (page sizes 16 and 256,
shuffled pages, spare pages no sequence owns, out-of-range entries past each sequence's end), lengths 0,
1, odd and long in one batch, grouped heads, Lq 1, 4 and 16, causal or not, num_splits 0, 1 and 3, D 64
and 128, fp16 and bf16, lse; strided views; torch.compile(fullgraph=True); opcheck; a CUDA-graph decode
step replayed with new lengths.

Without a GPU (PyTorch only): every argument check, on meta tensors or under FakeTensorMode.

Every random input of a GPU test comes from the `rng` fixture (conftest.py): seeded from
EVOSDPA_TEST_SEED when set, else fresh, and named in the failure report to replay it."""
import contextlib
import math

import pytest

from conftest import HAVE_TORCH, capture_graph, launched_kernels, needs_gpu, needs_torch

if HAVE_TORCH:
    import torch

    from accuracy import DTYPE_CODES, baseline, check_attention, check_lse, effective_scale, max_abs_error

import evosdpa
from evosdpa import _lib

pytestmark = needs_torch

# ---- the float64 reference, sequence by sequence -------------------------------------------------------


def sequence_kv(cache, table, b, n):
    """[Hkv, slots, D]: what sequence b's cache holds, gathered in Python. Dense: all Lk rows of cache[b].
    Paged: the first ceil(n / page_size) pages of its table row, one after the other (the entries past
    them may be out of range: never read)."""
    if table is None:
        rows = cache[b]
    else:
        page = cache.shape[1]
        pages = table[b].tolist()[: -(-n // page)]
        rows = torch.cat([cache[p] for p in pages]) if pages else cache.new_empty((0, *cache.shape[2:]))
    return rows.transpose(0, 1)


def reference_kvcache(q, k_cache, v_cache, lengths, table, causal, scale=None):
    """[(O [Hq, Lq, D], lse [Hq, Lq])] in float64, one per sequence. Query i of sequence b is token
    n - Lq + i of it (n = lengths[b]); it sees key j when j < n and, with causal, j <= its own position.
    A row with no visible key gets O = 0 and lse = -inf."""
    _, lq, hq, d = q.shape
    sc = effective_scale(scale, d)
    result = []
    for b, n in enumerate(lengths):
        # Its first n keys only: the slots past them are never read (they may hold NaN, which 0 * NaN would
        # carry into P.V here too).
        k = sequence_kv(k_cache, table, b, n)[:, :n].double()
        v = sequence_kv(v_cache, table, b, n)[:, :n].double()
        group = hq // k.shape[0]
        k, v = k.repeat_interleave(group, 0), v.repeat_interleave(group, 0)  # query head h reads K/V head h // group
        position = (n - lq + torch.arange(lq, device=q.device))[:, None]
        key = torch.arange(k.shape[1], device=q.device)[None, :]
        visible = key < n
        if causal:
            visible = visible & (key <= position)
        s = (q[b].transpose(0, 1).double() @ k.transpose(1, 2)) * sc
        s = s.masked_fill(~visible, float("-inf"))
        lse = torch.logsumexp(s, dim=-1)
        p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
        result.append((p @ v, lse))
    return result


def check_kvcache(out, lse, ref, q, k_cache, v_cache, lengths, table, causal, scale=None, rng=None, what=""):
    """out [B, Lq, Hq, D] and lse [B, Hq, Lq] (or None) against reference_kvcache's `ref` under the accuracy
    rule, per sequence: the fused baseline of that sequence's attention (its n keys, bottom-right aligned)
    sets the tolerance; rows with no visible key must be exactly 0 with lse -inf."""
    replay = f" [inputs from {rng!r}]" if rng is not None else ""
    b_, lq, hq, _ = q.shape
    assert out.shape == q.shape and out.dtype == q.dtype, (
        f"{what}: O is {tuple(out.shape)} {out.dtype}, expected {tuple(q.shape)} {q.dtype}{replay}")
    if lse is not None:
        assert lse.shape == (b_, hq, lq) and lse.dtype == torch.float32, (
            f"{what}: lse is {tuple(lse.shape)} {lse.dtype}, expected {(b_, hq, lq)} torch.float32{replay}")
    code = DTYPE_CODES[q.dtype]
    for b, n in enumerate(lengths):
        where = f"{what}, sequence {b} of length {n}"
        ref_o, ref_lse = ref[b]
        got = out[b].transpose(0, 1)  # [Hq, Lq, D]
        qb = q[b].transpose(0, 1)
        kb = sequence_kv(k_cache, table, b, n)[:, :n]
        vb = sequence_kv(v_cache, table, b, n)[:, :n]
        base_err = max_abs_error(baseline(qb, kb, vb, causal, "bottom_right", scale), ref_o)
        magnitude = ref_o.abs().max().item() if ref_o.numel() else 0.0
        tol = _lib.output_tolerance(code, base_err, magnitude)
        err = max_abs_error(got, ref_o)
        assert err <= tol, (f"{where}: max |O - O_f64| = {err:.4g} > tolerance {tol:.4g} ({q.dtype}, baseline "
                            f"error {base_err:.4g}, max |O_f64| {magnitude:.4g}){replay}")
        no_key = torch.isneginf(ref_lse)
        assert not got[no_key].ne(0).any(), f"{where}: O is not exactly 0 on the rows that see no key{replay}"
        if lse is not None:
            check_lse(lse[b], ref_lse, rng=rng, what=where, dtype=code)


def make_cache(rng, kind, batch, heads_kv, head_dim, dtype, capacity, spare_pages=5):
    """(k_cache, v_cache, block_table): dense [B, capacity, Hkv, D] (table None) for kind "dense", else
    paged with page size `kind`: [num_pages, page, Hkv, D] and an int32 table [B, capacity / page] of
    shuffled pages, with spare pages (random data) that no sequence owns."""
    if kind == "dense":
        shape = (batch, capacity, heads_kv, head_dim)
        return rng.randn(*shape, dtype=dtype), rng.randn(*shape, dtype=dtype), None
    blocks = capacity // kind
    num_pages = batch * blocks + spare_pages
    shape = (num_pages, kind, heads_kv, head_dim)
    order = torch.randperm(num_pages, generator=rng.generator, device=rng.device)
    table = order[: batch * blocks].reshape(batch, blocks).to(torch.int32)
    return rng.randn(*shape, dtype=dtype), rng.randn(*shape, dtype=dtype), table


def poison_unused_entries(table, lengths, page, num_pages):
    """Entries past each sequence's last page: -1 and num_pages + i by turns, out of range (never read)."""
    host = table.cpu()
    for b, n in enumerate(lengths):
        for i in range(-(-n // page), table.shape[1]):
            host[b, i] = -1 if i % 2 else num_pages + i
    table.copy_(host)


# ---- on a GPU --------------------------------------------------------------------------------------------

CAPACITY = 2048
LENGTHS = [0, 1, 37, 1999, CAPACITY, 300]  # empty, one key, odd, long, full, a few pages


def cache_id(kind):
    return kind if kind == "dense" else f"page{kind}"


@needs_gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("head_dim", [64, 128], ids=["d64", "d128"])
@pytest.mark.parametrize("heads", [(8, 2), (4, 4)], ids=["gqa4", "mha"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("kind", ["dense", 16, 256], ids=cache_id)
def test_matches_float64(kind, causal, heads, head_dim, dtype, rng):
    dt = getattr(torch, dtype)
    hq, hkv = heads
    batch = len(LENGTHS)
    k_cache, v_cache, table = make_cache(rng, kind, batch, hkv, head_dim, dt, CAPACITY)
    if table is not None:
        poison_unused_entries(table, LENGTHS, kind, k_cache.shape[0])
    lens = torch.tensor(LENGTHS, dtype=torch.int32, device="cuda")
    for lq in (1, 4, 16):
        q = rng.randn(batch, lq, hq, head_dim, dtype=dt)
        ref = reference_kvcache(q, k_cache, v_cache, LENGTHS, table, causal)
        for splits in (0, 1, 3):
            out, lse = evosdpa.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, block_table=table,
                                                      causal=causal, num_splits=splits, return_softmax_lse=True)
            check_kvcache(out, lse, ref, q, k_cache, v_cache, LENGTHS, table, causal, rng=rng,
                          what=f"{cache_id(kind)} Lq={lq} num_splits={splits}")
            if splits == 0:  # without lse: the same O
                alone = evosdpa.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, block_table=table,
                                                       causal=causal)
                torch.testing.assert_close(alone, out, rtol=0, atol=0, msg=lambda m: f"{m} [inputs from {rng!r}]")


@needs_gpu
@pytest.mark.parametrize("kernel", ["auto", "wgmma_sm90", "mma_sm80", "splitkv_sm80", "reference"])
def test_slots_past_the_lengths_may_hold_nan(kernel, rng):
    # A dense cache's slots past each sequence's length hold NaN (memory from torch.empty may): no kernel may
    # read them into O. 40 new queries per sequence, so that "auto" runs the dense kernels (wgmma_sm90 on
    # Hopper, which loads whole tiles by TMA and zeroes V's rows past the length before P.V), 1 for
    # splitkv_sm80; lengths off a tile boundary but one.
    lengths = [1, 37, 300, 1000, 640]
    k_cache, v_cache, _ = make_cache(rng, "dense", len(lengths), 2, 128, torch.float16, 1024)
    for b, n in enumerate(lengths):
        k_cache[b, n:] = math.nan
        v_cache[b, n:] = math.nan
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    for lq in (1, 40):
        q = rng.randn(len(lengths), lq, 8, 128, dtype=torch.float16)
        for causal in (False, True):
            try:
                out, lse = evosdpa.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, causal=causal,
                                                          return_softmax_lse=True, kernel=kernel)
            except ValueError:
                assert kernel != "auto"
                continue  # a kernel that does not run this call here (splitkv_sm80: up to 16 queries)
            ref = reference_kvcache(q, k_cache, v_cache, lengths, None, causal)
            check_kvcache(out, lse, ref, q, k_cache, v_cache, lengths, None, causal, rng=rng,
                          what=f"NaN past the lengths, Lq={lq} causal={causal} kernel={kernel}")


@needs_gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_scales_and_large_magnitudes(dtype, rng):
    # q, k ~ N(0, 36): peaked rows, large |lse|; explicit scales, 0 included (uniform over the visible keys).
    dt = getattr(torch, dtype)
    lengths = [700, 5, 64]
    k_cache, v_cache, table = make_cache(rng, 16, 3, 2, 128, dt, 1024)
    k_cache.mul_(6)
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    q = rng.randn(3, 4, 8, 128, dtype=dt, std=6.0)
    for scale in (None, 0.3, -0.5, 0.0):
        out, lse = evosdpa.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, block_table=table,
                                                  softmax_scale=scale, causal=True, return_softmax_lse=True)
        ref = reference_kvcache(q, k_cache, v_cache, lengths, table, True, scale)
        check_kvcache(out, lse, ref, q, k_cache, v_cache, lengths, table, True, scale, rng=rng, what=f"scale={scale}")


@needs_gpu
def test_decoding_through_attention_splits_the_keys(rng):
    # evosdpa.attention and the SDPA drop-in on a decoding shape: "auto" runs splitkv_sm80 with a workspace for
    # its key parts, as attention_with_kvcache does (without one, 1 query x 32 heads over 8 K/V heads ran 8
    # blocks on the whole GPU whatever the cache's length).
    q = rng.randn(1, 32, 1, 128, dtype=torch.float16)
    k, v = rng.randn(1, 8, 8192, 128, dtype=torch.float16), rng.randn(1, 8, 8192, 128, dtype=torch.float16)
    with launched_kernels() as ran:
        out = evosdpa.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    assert len(ran) == 1 and ran[0][0] == "splitkv_sm80" and ran[0][1] > 0, ran
    check_attention(out, q, k, v, rng=rng, what="decoding through the SDPA drop-in")


@needs_gpu
def test_no_heads_is_an_empty_result(rng):
    k_cache, v_cache, _ = make_cache(rng, "dense", 2, 2, 64, torch.float16, 100)
    q = rng.randn(2, 3, 4, 64, dtype=torch.float16)
    out, lse = evosdpa.attention_with_kvcache(q[:, :, :0], k_cache[:, :, :0], v_cache[:, :, :0], cache_seqlens=50,
                                              return_softmax_lse=True)
    assert out.shape == (2, 3, 0, 64) and lse.shape == (2, 0, 3)


@needs_gpu
def test_lengths_as_int_none_and_clamped(rng):
    b, hq, hkv, d, lk = 3, 4, 2, 64, 300
    k_cache, v_cache, _ = make_cache(rng, "dense", b, hkv, d, torch.float16, lk)
    q = rng.randn(b, 4, hq, d, dtype=torch.float16)
    # An int: the same length for every sequence, as the full tensor gives.
    out = evosdpa.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=123, causal=True)
    full = torch.full((b,), 123, dtype=torch.int32, device="cuda")
    torch.testing.assert_close(out, evosdpa.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=full,
                                                                   causal=True), rtol=0, atol=0)
    check_kvcache(out, None, reference_kvcache(q, k_cache, v_cache, [123] * b, None, True), q, k_cache, v_cache,
                  [123] * b, None, True, rng=rng, what="cache_seqlens=123")
    # None: every key of the dense cache, which is evosdpa.attention's bottom-right attention in BSHD.
    out, lse = evosdpa.attention_with_kvcache(q, k_cache, v_cache, causal=True, return_softmax_lse=True)
    check_kvcache(out, lse, reference_kvcache(q, k_cache, v_cache, [lk] * b, None, True), q, k_cache, v_cache,
                  [lk] * b, None, True, rng=rng, what="cache_seqlens=None")
    # Values outside [0, Lk] in the tensor are clamped into it (the kernel reads them; nothing checks them).
    wild = torch.tensor([-5, lk + 77, 2**31 - 1], dtype=torch.int32, device="cuda")
    tame = torch.tensor([0, lk, lk], dtype=torch.int32, device="cuda")
    got = evosdpa.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=wild, causal=True)
    torch.testing.assert_close(got, evosdpa.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=tame,
                                                                   causal=True), rtol=0, atol=0)


@needs_gpu
def test_strided_views(rng):
    b, hq, hkv, d, lq = 2, 8, 2, 128, 3
    lengths = [77, 250]
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    q = rng.randn(b, hq, lq, d, dtype=torch.bfloat16).transpose(1, 2)  # [B, Lq, Hq, D], heads outermost
    # A dense cache packed as [B, Lk, 2, Hkv, D] (K and V interleaved): views with a seq stride of 2 Hkv D.
    packed = rng.randn(b, 256, 2, hkv, d, dtype=torch.bfloat16)
    k_cache, v_cache = packed[:, :, 0], packed[:, :, 1]
    out = evosdpa.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, causal=True)
    check_kvcache(out, None, reference_kvcache(q, k_cache, v_cache, lengths, None, True), q, k_cache, v_cache,
                  lengths, None, True, rng=rng, what="packed dense cache")
    # A head-major paged cache [num_pages, Hkv, page, D] seen as [num_pages, page, Hkv, D]; the table a column
    # slice of a wider one, and the lengths a strided view (copied).
    k_pages, v_pages, table = make_cache(rng, 16, b, hkv, d, torch.bfloat16, 256)
    k_hm, v_hm = k_pages.transpose(1, 2).contiguous(), v_pages.transpose(1, 2).contiguous()  # [pages, Hkv, 16, D]
    k_cache, v_cache = k_hm.transpose(1, 2), v_hm.transpose(1, 2)
    assert k_cache.shape == k_pages.shape and k_cache.stride(1) == d and k_cache.stride(2) == 16 * d
    wide = torch.full((b, table.shape[1] + 3), -1, dtype=torch.int32, device="cuda")
    wide[:, : table.shape[1]] = table
    narrow = wide[:, : table.shape[1]]
    spaced = torch.tensor([lengths[0], 0, lengths[1], 0], dtype=torch.int32, device="cuda")[::2]
    out = evosdpa.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=spaced, block_table=narrow, causal=True)
    check_kvcache(out, None, reference_kvcache(q, k_cache, v_cache, lengths, table, True), q, k_cache, v_cache,
                  lengths, table, True, rng=rng, what="head-major paged cache")
    # One table row for every sequence (expanded: rows overlap, copied) and a strided last dimension (copied).
    shared = table[:1].expand(b, -1)
    q_t = q.transpose(-1, -2).contiguous().transpose(-1, -2)
    assert q_t.stride(-1) != 1
    out = evosdpa.attention_with_kvcache(q_t, k_cache, v_cache, cache_seqlens=lens, block_table=shared)
    check_kvcache(out, None, reference_kvcache(q, k_cache, v_cache, lengths, shared, False), q, k_cache, v_cache,
                  lengths, shared, False, rng=rng, what="one shared table row")


@needs_gpu
def test_named_kernels(rng):
    lengths = [0, 33, 500]
    k_cache, v_cache, table = make_cache(rng, 16, 3, 2, 64, torch.float16, 512)
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    q = rng.randn(3, 4, 8, 64, dtype=torch.float16)
    ref = reference_kvcache(q, k_cache, v_cache, lengths, table, True)
    for kernel, splits in (("splitkv_sm80", 0), ("splitkv_sm80", 3), ("reference", 0), ("reference", 1)):
        out, lse = evosdpa.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, block_table=table,
                                                  causal=True, num_splits=splits, return_softmax_lse=True,
                                                  kernel=kernel)
        check_kvcache(out, lse, ref, q, k_cache, v_cache, lengths, table, True, rng=rng,
                      what=f"kernel {kernel} num_splits={splits}")
    with pytest.raises(ValueError):  # only the split-KV kernel splits
        evosdpa.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, block_table=table, num_splits=3,
                                       kernel="reference")
    with pytest.raises(ValueError):  # the other kernels refuse a KV cache
        evosdpa.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, block_table=table, kernel="mma_sm80")
    with pytest.raises(ValueError, match="unknown kernel"):
        evosdpa.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, block_table=table, kernel="fastest")


@needs_gpu
def test_no_backward_pass(rng):
    k_cache, v_cache, table = make_cache(rng, 16, 2, 2, 64, torch.float16, 64)
    q = rng.randn(2, 1, 4, 64, dtype=torch.float16).requires_grad_()
    out = evosdpa.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=40, block_table=table)
    with pytest.raises(NotImplementedError, match="attention_with_kvcache has no backward pass"):
        out.float().sum().backward()
    with torch.no_grad():
        out = evosdpa.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=40, block_table=table)
    assert not out.requires_grad


@needs_gpu
def test_torch_compile_fullgraph(rng):
    lengths = [3, 90]
    k_cache, v_cache, table = make_cache(rng, 16, 2, 2, 128, torch.float16, 128)
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    q = rng.randn(2, 4, 8, 128, dtype=torch.float16)

    def f(q, k_cache, v_cache, lens, table):
        return evosdpa.attention_with_kvcache(q * 2, k_cache, v_cache, cache_seqlens=lens, block_table=table,
                                              causal=True) + 1

    eager = f(q, k_cache, v_cache, lens, table)
    compiled = torch.compile(f, fullgraph=True)(q, k_cache, v_cache, lens, table)
    torch.testing.assert_close(compiled, eager, rtol=0, atol=0, msg=lambda m: f"{m} [inputs from {rng!r}]")

    def g(q, k_cache, v_cache):  # a dense cache, an int length, splits and the lse
        return evosdpa.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=100, num_splits=3,
                                              return_softmax_lse=True)

    dense_k, dense_v, _ = make_cache(rng, "dense", 2, 2, 128, torch.float16, 128)
    for got, want in zip(torch.compile(g, fullgraph=True)(q, dense_k, dense_v), g(q, dense_k, dense_v)):
        torch.testing.assert_close(got, want, rtol=0, atol=0, msg=lambda m: f"{m} [inputs from {rng!r}]")


@needs_gpu
def test_opcheck(rng):
    k_paged, v_paged, table = make_cache(rng, 16, 2, 2, 64, torch.float16, 256)
    k_dense, v_dense, _ = make_cache(rng, "dense", 2, 2, 64, torch.float16, 200)
    lens = torch.tensor([17, 150], dtype=torch.int32, device="cuda")
    q = rng.randn(2, 4, 8, 64, dtype=torch.float16)
    op = torch.ops.evosdpa.attention_kvcache.default
    for args in [(q, k_dense, v_dense, lens, None, _lib.CAUSAL_BOTTOM_RIGHT, math.nan, 0, True, "auto"),
                 (q, k_paged, v_paged, lens, table, _lib.CAUSAL_NONE, 0.125, 3, False, "auto"),
                 (q, k_paged, v_paged, None, table, _lib.CAUSAL_BOTTOM_RIGHT, math.nan, 1, True, "reference")]:
        torch.library.opcheck(op, args)


@needs_gpu
def test_cuda_graph_decode_step(rng):
    # One decode step captured once, replayed after the caller appends a token to each sequence and grows
    # cache_seqlens in place: the replay reads the new lengths (and keys) from device memory.
    b, hq, hkv, d, page, blocks = 3, 8, 2, 128, 16, 32
    k_cache, v_cache, table = make_cache(rng, page, b, hkv, d, torch.float16, page * blocks)
    lens = torch.tensor([5, 130, 300], dtype=torch.int32, device="cuda")
    q = rng.randn(b, 1, hq, d, dtype=torch.float16)

    def step():
        return evosdpa.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, block_table=table, causal=True,
                                              return_softmax_lse=True)

    expected = step()
    graph, (out, lse) = capture_graph(step)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, expected[0], rtol=0, atol=0)
    torch.testing.assert_close(lse, expected[1], rtol=0, atol=0)

    def append_token():  # the caller's part: the new token's K and V at position lens[b], then lens += 1
        for i, n in enumerate(lens.tolist()):
            p = int(table[i, n // page])
            k_cache[p, n % page] = rng.randn(hkv, d, dtype=torch.float16)
            v_cache[p, n % page] = rng.randn(hkv, d, dtype=torch.float16)
        lens.add_(1)
        q.copy_(rng.randn_like(q))

    for new_lengths in (None, [0, 17, page * blocks]):
        if new_lengths is None:
            append_token()
        else:
            lens.copy_(torch.tensor(new_lengths, dtype=torch.int32, device="cuda"))
        graph.replay()
        want_out, want_lse = step()
        torch.testing.assert_close(out, want_out, rtol=0, atol=0)
        torch.testing.assert_close(lse, want_lse, rtol=0, atol=0)
        lengths = lens.tolist()
        check_kvcache(out, lse, reference_kvcache(q, k_cache, v_cache, lengths, table, True), q, k_cache, v_cache,
                      lengths, table, True, rng=rng, what=f"graph replay with lengths {lengths}")


# ---- without a GPU: the argument checks ----------------------------------------------------------------


def meta(*shape, dtype=None):
    # Tensors on the meta device carry shape, dtype and strides without memory or a GPU.
    return torch.empty(*shape, dtype=dtype or torch.float16, device="meta")


def dense(b=2, lq=4, hq=8, hkv=2, d=64, lk=128, dtype=None):
    return meta(b, lq, hq, d, dtype=dtype), meta(b, lk, hkv, d, dtype=dtype), meta(b, lk, hkv, d, dtype=dtype)


def paged(b=2, lq=4, hq=8, hkv=2, d=64, page=16, pages=20, blocks=5):
    q, k, v = meta(b, lq, hq, d), meta(pages, page, hkv, d), meta(pages, page, hkv, d)
    return q, k, v, meta(b, blocks, dtype=torch.int32)


@contextlib.contextmanager
def fake_cuda():
    """Yield a maker of fake CUDA tensors (no GPU needed)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        yield lambda *shape, dtype=torch.float16: torch.empty(shape, dtype=dtype, device="cuda")


def call(q, k, v, **kw):
    return evosdpa.attention_with_kvcache(q, k, v, **kw)


@pytest.mark.parametrize("make, exc, text", [
    (lambda: ("q",) + dense()[1:], TypeError, "q must be a torch.Tensor"),
    (lambda: dense(dtype=torch.float32), TypeError, "q has dtype torch.float32; supported with a KV cache"),
    (lambda: dense(dtype=torch.float8_e4m3fn), TypeError, "supported with a KV cache: torch.float16, torch.bfloat16"),
    (lambda: (dense()[0], meta(2, 128, 2, 64, dtype=torch.bfloat16), meta(2, 128, 2, 64, dtype=torch.bfloat16)),
     TypeError, "q, k_cache, v_cache must share a dtype"),
    (lambda: (meta(2, 8, 64),) + dense()[1:], ValueError, r"q must be 4-D \[B, Lq, Hq, D\]"),
    (lambda: (dense()[0], meta(2, 128, 64), meta(2, 128, 64)), ValueError, r"k_cache must be 4-D \[B, Lk, Hkv, D\]"),
    (lambda: dense()[:2] + (meta(2, 64, 2, 64),), ValueError, "k_cache and v_cache shapes differ"),
    (lambda: (meta(2, 4, 8, 128),) + dense()[1:], ValueError, "head_dim differs: q 128, k_cache and v_cache 64"),
    (lambda: dense(d=80), ValueError, "head_dim 80 is not supported"),
    (lambda: dense(hq=6, hkv=4), ValueError, r"q heads \(6\) must be a multiple of k_cache/v_cache heads \(4\)"),
    (lambda: (meta(3, 4, 8, 64),) + dense()[1:], ValueError, "k_cache has batch 2, q 3"),
])
def test_bad_tensors(make, exc, text):
    q, k, v = make()
    with pytest.raises(exc, match=text):
        call(q, k, v)


def test_bad_block_tables():
    q, k, v, table = paged()
    with pytest.raises(ValueError, match="needs CUDA tensors"):  # every other check passed
        call(q, k, v, block_table=table)
    with pytest.raises(TypeError, match="block_table must be int32, got torch.int64"):
        call(q, k, v, block_table=meta(2, 5, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"block_table must be 2-D \[B, max_blocks\]"):
        call(q, k, v, block_table=meta(10, dtype=torch.int32))
    with pytest.raises(ValueError, match="block_table has 3 rows, q's batch is 2"):
        call(q, k, v, block_table=meta(3, 5, dtype=torch.int32))
    with pytest.raises(TypeError, match="block_table must be a torch.Tensor or None"):
        call(q, k, v, block_table=[[0, 1], [2, 3]])
    for page in (24, 8):
        q, k, v, table = paged(page=page)
        with pytest.raises(ValueError, match=rf"page size \(k_cache.shape\[1\] with a block_table\) must be a "
                                             rf"positive multiple of 16, got {page}"):
            call(q, k, v, block_table=table)
    q, k, v, table = paged()
    with pytest.raises(ValueError, match=r"k_cache must be 4-D \[num_pages, page_size, Hkv, D\]"):
        call(q, meta(20, 16, 128), meta(20, 16, 128), block_table=table)


def test_bad_lengths_splits_scale_and_kernel():
    q, k, v = dense()
    with pytest.raises(TypeError, match="cache_seqlens must be int32, got torch.int64"):
        call(q, k, v, cache_seqlens=meta(2, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"cache_seqlens must have shape \(B,\) = \(2,\), got \(3,\)"):
        call(q, k, v, cache_seqlens=meta(3, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"cache_seqlens must have shape \(B,\) = \(2,\), got \(2, 1\)"):
        call(q, k, v, cache_seqlens=meta(2, 1, dtype=torch.int32))
    for bad in ("5", 5.0, True):
        with pytest.raises(TypeError, match="cache_seqlens must be an int, an int32 tensor"):
            call(q, k, v, cache_seqlens=bad)
    with pytest.raises(ValueError, match="num_splits must be >= 0"):
        call(q, k, v, num_splits=-1)
    for bad in (1.5, True, None):
        with pytest.raises(TypeError, match="num_splits must be an int"):
            call(q, k, v, num_splits=bad)
    for bad in (float("nan"), float("inf"), -float("inf"), 1e39):
        with pytest.raises(ValueError, match="softmax_scale must be None or a finite"):
            call(q, k, v, softmax_scale=bad)
    with pytest.raises(TypeError, match="softmax_scale must be a float"):
        call(q, k, v, softmax_scale="0.1")
    with pytest.raises(TypeError, match="kernel must be a string"):
        call(q, k, v, kernel=3)
    # Valid options on meta tensors: every check before the device check passes.
    for kw in ({"softmax_scale": 0.0}, {"num_splits": 3}, {"cache_seqlens": meta(2, dtype=torch.int32)},
               {"causal": True, "return_softmax_lse": True}):
        with pytest.raises(ValueError, match="needs CUDA tensors"):
            call(q, k, v, **kw)


def test_tensors_off_the_gpu_are_named():
    q, k, v = (torch.zeros(2, 4, 8, 64, dtype=torch.float16), torch.zeros(2, 32, 2, 64, dtype=torch.float16),
               torch.zeros(2, 32, 2, 64, dtype=torch.float16))
    with pytest.raises(ValueError, match="q is on cpu; evosdpa needs CUDA tensors"):
        call(q, k, v)
    with fake_cuda() as cuda:
        q, k, v = cuda(2, 4, 8, 64), cuda(2, 32, 2, 64), cuda(2, 32, 2, 64)
        with pytest.raises(ValueError, match="cache_seqlens is on cpu; evosdpa needs CUDA tensors"):
            call(q, k, v, cache_seqlens=torch.zeros(2, dtype=torch.int32))
        pages = cuda(8, 16, 2, 64)
        with pytest.raises(ValueError, match="block_table is on cpu; evosdpa needs CUDA tensors"):
            call(q, pages, pages, block_table=torch.zeros(2, 4, dtype=torch.int32))


def test_accepted_forms_have_the_right_shapes():
    with fake_cuda() as cuda:
        q, k, v = cuda(2, 4, 8, 128), cuda(2, 300, 2, 128), cuda(2, 300, 2, 128)
        out = call(q, k, v)
        assert out.shape == (2, 4, 8, 128) and out.dtype == torch.float16 and out.device.type == "cuda"
        out, lse = call(q, k, v, cache_seqlens=cuda(2, dtype=torch.int32), causal=True, return_softmax_lse=True)
        assert out.shape == (2, 4, 8, 128) and lse.shape == (2, 8, 4) and lse.dtype == torch.float32
        assert call(q, k, v, cache_seqlens=300, num_splits=3).shape == (2, 4, 8, 128)
        assert call(q, k, v, cache_seqlens=0).shape == (2, 4, 8, 128)
        with pytest.raises(ValueError, match=r"cache_seqlens 301 is outside \[0, 300\]"):
            call(q, k, v, cache_seqlens=301)
        with pytest.raises(ValueError, match=r"cache_seqlens -1 is outside \[0, 300\]"):
            call(q, k, v, cache_seqlens=-1)
        # Paged, bf16, MQA (one K/V head), Lq 1; the int bound is max_blocks * page_size.
        qb = cuda(3, 1, 8, 64, dtype=torch.bfloat16)
        pages = cuda(40, 256, 1, 64, dtype=torch.bfloat16)
        table = cuda(3, 4, dtype=torch.int32)
        out, lse = call(qb, pages, pages, cache_seqlens=1024, block_table=table, return_softmax_lse=True)
        assert out.shape == (3, 1, 8, 64) and out.dtype == torch.bfloat16 and lse.shape == (3, 8, 1)
        with pytest.raises(ValueError, match=r"cache_seqlens 1025 is outside \[0, 1024\]"):
            call(qb, pages, pages, cache_seqlens=1025, block_table=table)
        # Strided forms the function copies: a strided last dimension, overlapping table rows, spaced lengths.
        q_t = cuda(2, 4, 128, 8).transpose(-1, -2)
        assert q_t.stride(-1) != 1
        assert call(q_t, k, v).shape == (2, 4, 8, 128)
        shared = cuda(1, 4, dtype=torch.int32).expand(3, 4)
        spaced = cuda(6, dtype=torch.int32)[::2]
        assert call(qb, pages, pages, cache_seqlens=spaced, block_table=shared).shape == (3, 1, 8, 64)
        # The op itself requires them as the kernel reads them.
        op = torch.ops.evosdpa.attention_kvcache
        with pytest.raises(ValueError, match="q must have a contiguous last dimension"):
            op(q_t, k, v, None, None, 0, math.nan, 0, False, "auto")
        with pytest.raises(ValueError, match="block_table's rows overlap"):
            op(qb, pages, pages, None, shared, 0, math.nan, 0, False, "auto")
        with pytest.raises(ValueError, match="cache_seqlens must be contiguous"):
            op(qb, pages, pages, spaced, table, 0, math.nan, 0, False, "auto")
        with pytest.raises(ValueError, match="num_splits must be >= 0"):
            op(q, k, v, None, None, 0, math.nan, -2, False, "auto")
        with pytest.raises(ValueError, match="scale must be finite"):
            op(q, k, v, None, None, 0, math.inf, 0, False, "auto")
        out, lse = op(q, k, v, None, None, _lib.CAUSAL_BOTTOM_RIGHT, math.nan, 0, False, "auto")
        assert out.shape == (2, 4, 8, 128) and lse.shape == (0,)
