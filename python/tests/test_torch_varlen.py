"""Variable-length batches (C ABI 0.6): evosdpa.attention_varlen and the op evosdpa::attention_varlen.

On a GPU, against a float64 reference written here, sequence by sequence: each sequence's queries, keys
and values are sliced out of the packed tensors by its offsets (known to the test on the host), the causal
mask is aligned within the sequence (bottom-right, FlashAttention's varlen convention; top-left through
the op), and the softmax is taken in float64. Outputs are judged by the library's accuracy rule
(accuracy.py: the fused baseline of the same sequence sets the tolerance); rows that see no key must be
exactly 0 with lse -inf. The output's memory holds NaN before the call (a private memory pool hands the
call blocks just filled with NaN), so a row the kernel forgets to write shows. Lengths 0, 1, odd and over
a thousand in one batch, query and key sequences of different lengths (more queries than keys and fewer),
grouped heads, D 64 and 128, fp16 and bf16, every kernel that serves packed sequences (a named one is
skipped where evosdpa says it does not run on this GPU at all), seqused_k, explicit scales, clamped offsets,
strided views, torch.compile(fullgraph=True), opcheck, CUDA-graph capture replayed with new offsets.

Without a GPU (PyTorch only): every argument check, on meta tensors or under FakeTensorMode, and that
tensors off the GPU are refused before the library is called.

Every random input of a GPU test comes from the `rng` fixture (conftest.py): seeded from
EVOSDPA_TEST_SEED when set, else fresh, and named in the failure report to replay it. The helpers take
the device from the rng, so that they run on the CPU as well against a stand-in for the library."""
import contextlib
import math

import pytest

from conftest import HAVE_TORCH, capture_graph, launched_kernels, needs_gpu, needs_torch

if HAVE_TORCH:
    import torch

    from accuracy import check_attention, visible_mask

import evosdpa
from evosdpa import _lib

pytestmark = needs_torch

KERNELS = ["auto", "wgmma_sm90", "mma_sm80", "reference"]

# ---- packed batches and the float64 reference, sequence by sequence --------------------------------------


def offsets(lengths):
    """[0, l0, l0 + l1, ...]: the cumulative lengths (cu_seqlens) of `lengths`."""
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


def cu(lengths, device):
    return torch.tensor(offsets(lengths), dtype=torch.int32, device=device)


def spans(lengths):
    """[(first row, rows)] of each sequence packed one after another."""
    return [(start, n) for start, n in zip(offsets(lengths), lengths)]


def packed(rng, lengths_q, lengths_k, hq, hkv, d, dtype, std=1.0):
    """q [total_q, Hq, D], k and v [total_k, Hkv, D] of random values."""
    total_q, total_k = sum(lengths_q), sum(lengths_k)
    return (rng.randn(total_q, hq, d, dtype=dtype, std=std), rng.randn(total_k, hkv, d, dtype=dtype, std=std),
            rng.randn(total_k, hkv, d, dtype=dtype))


def check_varlen(out, lse, q, k, v, spans_q, spans_k, *, causal, alignment="bottom_right", scale=None, rng=None,
                 what=""):
    """out [total_q, Hq, D] and lse [Hq, total_q] (or None) under the accuracy rule, sequence by sequence:
    sequence b is rows spans_q[b] of q (out, lse) against rows spans_k[b] of k and v, its causal mask
    aligned within it. Every row of out must have been written (no NaN: the tests cover all rows with
    sequences), and a row that sees no key must be exactly 0 with lse -inf."""
    replay = f" [inputs from {rng!r}]" if rng is not None else ""
    total_q, hq, _ = q.shape
    assert out.shape == q.shape and out.dtype == q.dtype, (
        f"{what}: O is {tuple(out.shape)} {out.dtype}, expected {tuple(q.shape)} {q.dtype}{replay}")
    assert not out.isnan().any(), (f"{what}: O has NaN on {int(out.isnan().any(dim=2).any(dim=1).sum())} rows "
                                   f"(rows the call did not write keep the NaN their memory held){replay}")
    if lse is not None:
        assert lse.shape == (hq, total_q) and lse.dtype == torch.float32, (
            f"{what}: lse is {tuple(lse.shape)} {lse.dtype}, expected {(hq, total_q)} torch.float32{replay}")
    for b, ((qs, lq), (ks, lk)) in enumerate(zip(spans_q, spans_k)):
        where = f"{what}, sequence {b} ({lq} queries at row {qs}, {lk} keys at row {ks})"
        got = out[qs:qs + lq].transpose(0, 1)  # [Hq, Lq, D]
        qb, kb, vb = (t[s:s + n].transpose(0, 1) for t, s, n in ((q, qs, lq), (k, ks, lk), (v, ks, lk)))
        check_attention(got, qb, kb, vb, causal=causal, alignment=alignment, scale=scale,
                        lse=None if lse is None else lse[:, qs:qs + lq], rng=rng, what=where)
        no_key = ~visible_mask(lq, lk, causal, alignment, q.device).any(dim=1)
        assert not got[:, no_key].ne(0).any(), f"{where}: O is not exactly 0 on the rows that see no key{replay}"


def on_poison(call, q, return_lse):
    """call()'s (O, lse), computed into memory that held NaN: in a private memory pool, blocks of O's and
    lse's sizes are filled with NaN and freed, so the torch.empty calls inside get exactly them back (the
    pointers are checked; call() must allocate nothing else, so its arguments are built before it). Returned as copies outside the pool. Without CUDA memory pools (the CPU, an
    older PyTorch) call() runs as it is."""
    if q.device.type != "cuda" or not hasattr(torch.cuda, "use_mem_pool"):
        result = call()
        return result if return_lse else (result, None)
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        o = torch.full(q.shape, math.nan, dtype=q.dtype, device=q.device)
        lse = torch.full((q.shape[1], q.shape[0]) if return_lse else (0,), math.nan, device=q.device)
        poisoned = (o.data_ptr(), lse.data_ptr())
        del o, lse
        result = call()
    out, lse = result if return_lse else (result, None)
    got = (out.data_ptr(), lse.data_ptr() if return_lse else poisoned[1])
    assert got == poisoned, f"the call's outputs are not in the poisoned blocks ({got} != {poisoned})"
    copies = out.clone(), None if lse is None else lse.clone()  # outside the pool
    del out, lse, result  # before the pool
    return copies


_RUNS_HERE = {}


def skip_unless_runs_here(kernel):
    """Skip a named kernel that evosdpa says does not run on this GPU at all: asked with a plain padded fp16
    problem, so that a kernel that runs here but refuses packed sequences fails the test instead."""
    if kernel == "auto":
        return
    if kernel not in _RUNS_HERE:
        x = torch.ones(1, 128, 2, 64, dtype=torch.float16, device="cuda")
        try:
            evosdpa.attention(x, x, x, layout="bshd", kernel=kernel)
            _RUNS_HERE[kernel] = None
        except (ValueError, evosdpa.EvosdpaError) as e:
            _RUNS_HERE[kernel] = str(e)
    if _RUNS_HERE[kernel] is not None:
        pytest.skip(f"kernel {kernel} does not run on this GPU: {_RUNS_HERE[kernel]}")


# ---- on a GPU --------------------------------------------------------------------------------------------

# Empty, one, odd, over a thousand, a few tiles; each query sequence against a key sequence of its own
# length (self-attention) and against one of another length: fewer keys (1100/1000, 300/257, 129/17: leading
# queries see no key under the causal mask), more keys (37/90, empty queries against 3 keys), no keys (5/0).
LENGTHS_Q = [0, 1, 37, 1100, 5, 300, 64, 129]
LENGTHS_K = [3, 1, 90, 1000, 0, 257, 64, 17]


@needs_gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("head_dim", [64, 128], ids=["d64", "d128"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("kernel", KERNELS)
def test_matches_float64(kernel, causal, head_dim, dtype, rng):
    skip_unless_runs_here(kernel)
    dt = getattr(torch, dtype)
    hq, hkv = 8, 2
    for name, lengths_k in (("self", LENGTHS_Q), ("cross", LENGTHS_K)):
        q, k, v = packed(rng, LENGTHS_Q, lengths_k, hq, hkv, head_dim, dt)
        cu_q, cu_k = cu(LENGTHS_Q, rng.device), cu(lengths_k, rng.device)
        args = (q, k, v, cu_q, cu_k, max(LENGTHS_Q), max(lengths_k))
        out, lse = on_poison(lambda: evosdpa.attention_varlen(*args, causal=causal, return_softmax_lse=True,
                                                              kernel=kernel), q, True)
        what = f"{name} kernel={kernel}"
        check_varlen(out, lse, q, k, v, spans(LENGTHS_Q), spans(lengths_k), causal=causal, rng=rng, what=what)
        alone, _ = on_poison(lambda: evosdpa.attention_varlen(*args, causal=causal, kernel=kernel), q, False)
        torch.testing.assert_close(alone, out, rtol=0, atol=0, msg=lambda m: f"{what} without lse: {m} [inputs from "
                                                                             f"{rng!r}]")
        if causal:  # the op's other alignment: query i sees key j <= i of its own sequence
            out, lse = on_poison(lambda: torch.ops.evosdpa.attention_varlen(
                q, k, v, cu_q, cu_k, None, max(LENGTHS_Q), max(lengths_k), _lib.CAUSAL_TOP_LEFT, math.nan, True,
                kernel), q, True)
            check_varlen(out, lse, q, k, v, spans(LENGTHS_Q), spans(lengths_k), causal=True, alignment="top_left",
                         rng=rng, what=f"{what} top-left")


@needs_gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("kernel", KERNELS)
def test_seqused_k(kernel, causal, rng):
    # Sequence b sees the first min(len_k(b), seqused_k[b]) of its keys, a negative count meaning none, and the
    # causal mask aligns its last query with the last key it sees.
    skip_unless_runs_here(kernel)
    lengths_q = [4, 1, 300, 17, 1, 64]
    lengths_k = [100, 50, 700, 17, 9, 640]
    used = [37, 50, 1000, 0, -3, 333]
    q, k, v = packed(rng, lengths_q, lengths_k, 8, 2, 128, torch.bfloat16)
    seen = [min(n, max(u, 0)) for n, u in zip(lengths_k, used)]
    cu_q, cu_k = cu(lengths_q, rng.device), cu(lengths_k, rng.device)
    seqused = torch.tensor(used, dtype=torch.int32, device=rng.device)
    out, lse = on_poison(lambda: evosdpa.attention_varlen(
        q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k), causal=causal, return_softmax_lse=True,
        seqused_k=seqused, kernel=kernel), q, True)
    check_varlen(out, lse, q, k, v, spans(lengths_q), [(s, n) for (s, _), n in zip(spans(lengths_k), seen)],
                 causal=causal, rng=rng, what=f"seqused_k {used}, kernel={kernel}")


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
def test_rows_no_sequence_sees_may_hold_nan(kernel, rng):
    # K and V rows past a sequence's seqused_k and padding rows after the last sequence hold NaN (memory from
    # torch.empty may): no kernel may read them into O (wgmma_sm90 loads whole tiles by TMA and zeroes V's
    # rows past the sequence's end before P.V).
    skip_unless_runs_here(kernel)
    lengths_q, lengths_k, used = [4, 300, 17, 64], [100, 700, 17, 640], [37, 1000, 5, 333]
    q, k, v = packed(rng, lengths_q, lengths_k, 8, 2, 128, torch.float16)
    pad = torch.full((40, 2, 128), math.nan, dtype=k.dtype, device=k.device)
    k, v = torch.cat([k, pad]), torch.cat([v, pad])
    seen = [min(n, u) for n, u in zip(lengths_k, used)]
    for (start, n), u in zip(spans(lengths_k), seen):
        k[start + u:start + n] = math.nan
        v[start + u:start + n] = math.nan
    cu_q, cu_k = cu(lengths_q, rng.device), cu(lengths_k, rng.device)
    seqused = torch.tensor(used, dtype=torch.int32, device=rng.device)
    for causal in (False, True):
        out, lse = evosdpa.attention_varlen(q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k), causal=causal,
                                            return_softmax_lse=True, seqused_k=seqused, kernel=kernel)
        check_varlen(out, lse, q, k, v, spans(lengths_q), [(s, n) for (s, _), n in zip(spans(lengths_k), seen)],
                     causal=causal, rng=rng, what=f"NaN past seqused_k and the last sequence, kernel={kernel}")


@needs_gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_scales_and_large_magnitudes(dtype, rng):
    # q, k ~ N(0, 36): peaked rows, large |lse|; explicit scales, 0 included (uniform over the visible keys).
    dt = getattr(torch, dtype)
    lengths_q, lengths_k = [700, 5, 64, 1], [650, 80, 64, 1]
    q, k, v = packed(rng, lengths_q, lengths_k, 4, 2, 128, dt, std=6.0)
    cu_q, cu_k = cu(lengths_q, rng.device), cu(lengths_k, rng.device)
    for scale in (None, 0.3, -0.5, 0.0):
        for causal in (False, True):
            out, lse = on_poison(lambda: evosdpa.attention_varlen(
                q, k, v, cu_q, cu_k, 700, 650, softmax_scale=scale,
                causal=causal, return_softmax_lse=True), q, True)
            check_varlen(out, lse, q, k, v, spans(lengths_q), spans(lengths_k), causal=causal, scale=scale, rng=rng,
                         what=f"scale={scale} causal={causal}")


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
def test_offsets_are_clamped(kernel, rng):
    # The kernel reads the key offsets and clamps them (evosdpa.h): an entry below 0 is 0, one past total_k is
    # total_k, an end below its start an empty sequence; a sequence longer than max_seqlen_k sees its first
    # max_seqlen_k keys (its causal mask aligned with those). The query offsets are valid: every row is written.
    skip_unless_runs_here(kernel)
    lengths_q = [3, 20, 7, 50]
    total_k, max_k = 400, 120
    offsets_k = [-5, 60, 40, 300, 10**6]
    starts = [min(max(c, 0), total_k) for c in offsets_k[:-1]]
    ends = [min(max(c, s), total_k) for c, s in zip(offsets_k[1:], starts)]
    spans_k = [(s, min(e - s, max_k)) for s, e in zip(starts, ends)]  # (0, 60), (60, 0), (40, 120), (300, 100)
    q, k, v = packed(rng, lengths_q, [total_k], 8, 2, 64, torch.float16)
    cu_k = torch.tensor(offsets_k, dtype=torch.int32, device=rng.device)
    cu_q = cu(lengths_q, rng.device)
    for causal in (False, True):
        out, lse = on_poison(lambda: evosdpa.attention_varlen(
            q, k, v, cu_q, cu_k, max(lengths_q), max_k, causal=causal, return_softmax_lse=True,
            kernel=kernel), q, True)
        check_varlen(out, lse, q, k, v, spans(lengths_q), spans_k, causal=causal, rng=rng,
                     what=f"cu_seqlens_k {offsets_k} max_seqlen_k {max_k} causal={causal} kernel={kernel}")


@needs_gpu
def test_strided_views(rng):
    lengths_q, lengths_k = [33, 1, 250], [40, 0, 250]
    total_q, total_k = sum(lengths_q), sum(lengths_k)
    # q: 8 of 12 heads of a wider tensor (head stride D, seq stride 12 D); k and v interleaved in one
    # [total_k, 2, Hkv, D] tensor (seq stride 2 Hkv D); the offsets strided views (copied).
    wide = rng.randn(total_q, 12, 128, dtype=torch.float16)
    q = wide[:, 2:10]
    kv = rng.randn(total_k, 2, 2, 128, dtype=torch.float16)
    k, v = kv[:, 0], kv[:, 1]
    assert not q.is_contiguous() and q.stride() == (12 * 128, 128, 1) and k.stride() == (4 * 128, 128, 1)
    spaced_q = torch.stack([cu(lengths_q, rng.device), torch.zeros(4, dtype=torch.int32, device=rng.device)], 1)[:, 0]
    spaced_k = torch.stack([cu(lengths_k, rng.device), torch.zeros(4, dtype=torch.int32, device=rng.device)], 1)[:, 0]
    assert spaced_q.stride(0) == 2
    for causal in (False, True):  # not on_poison: the wrapper's copies of the offsets would take its blocks
        out, lse = evosdpa.attention_varlen(q, k, v, spaced_q, spaced_k, 250, 250, causal=causal,
                                            return_softmax_lse=True)
        check_varlen(out, lse, q, k, v, spans(lengths_q), spans(lengths_k), causal=causal, rng=rng,
                     what=f"strided views causal={causal}")
    # Rows 2 bytes off 16-byte alignment (rows D + 1 elements apart): copied by the op, so that "auto" runs a
    # tensor-core kernel rather than the reference one, which alone reads such rows.
    odd = [torch.empty(*t.shape[:-1], t.shape[-1] + 1, dtype=t.dtype, device=t.device)[..., 1:].copy_(t)
           for t in (q, k, v)]
    with launched_kernels() as ran:
        out = evosdpa.attention_varlen(*odd, spaced_q, spaced_k, 250, 250, causal=True)
    check_varlen(out, None, q, k, v, spans(lengths_q), spans(lengths_k), causal=True, rng=rng,
                 what="misaligned rows")
    assert ran and all(name != "reference" for name, _ in ran), ran
    # A strided last dimension is copied.
    q_t = q.transpose(-1, -2).contiguous().transpose(-1, -2)
    assert q_t.stride(-1) != 1
    out = evosdpa.attention_varlen(q_t, k, v, spaced_q, spaced_k, 250, 250, causal=True)
    check_varlen(out, None, q, k, v, spans(lengths_q), spans(lengths_k), causal=True, rng=rng,
                 what="strided last dimension")


@needs_gpu
def test_empty_batches(rng):
    d, device = 64, rng.device
    q, k, v = packed(rng, [4, 6], [0, 0], 4, 2, d, torch.float16)
    # No keys at all (total_k 0): every query gets O = 0 and lse = -inf.
    cu_q, cu_k = cu([4, 6], device), cu([0, 0], device)
    out, lse = on_poison(lambda: evosdpa.attention_varlen(q, k, v, cu_q, cu_k, 6, 0, causal=True,
                                                          return_softmax_lse=True), q, True)
    assert k.shape[0] == 0
    assert torch.equal(out, torch.zeros_like(out)), f"O is not all 0 without keys: {out.flatten()[:8].tolist()}"
    assert bool(torch.isneginf(lse).all()), f"lse is not all -inf without keys: {lse.flatten()[:8].tolist()}"
    # No queries at all, and no sequences at all (cu_seqlens [0]).
    q0 = q[:0]
    out, lse = evosdpa.attention_varlen(q0, q, q, cu([0, 0], device), cu([4, 6], device), 0, 6,
                                        return_softmax_lse=True)
    assert out.shape == (0, 4, d) and lse.shape == (4, 0)
    out, lse = evosdpa.attention_varlen(q0, k, v, cu([], device), cu([], device), 0, 0, return_softmax_lse=True)
    assert out.shape == (0, 4, d) and lse.shape == (4, 0)
    # No heads at all: an empty result.
    out, lse = evosdpa.attention_varlen(q[:, :0], q[:, :0], q[:, :0], cu_q, cu_q, 6, 6, return_softmax_lse=True)
    assert out.shape == (10, 0, d) and lse.shape == (0, 10)


@needs_gpu
def test_named_kernels_that_refuse_packed_sequences(rng):
    q, k, v = packed(rng, [5, 9], [5, 9], 4, 2, 64, torch.float16)
    cu_q = cu([5, 9], rng.device)
    with pytest.raises(ValueError):  # the split-KV kernel reads padded KV caches only
        evosdpa.attention_varlen(q, k, v, cu_q, cu_q, 9, 9, kernel="splitkv_sm80")
    with pytest.raises(ValueError, match="unknown kernel"):
        evosdpa.attention_varlen(q, k, v, cu_q, cu_q, 9, 9, kernel="fastest")


@needs_gpu
def test_an_older_library_is_named(monkeypatch, rng):
    q, k, v = packed(rng, [5, 9], [5, 9], 4, 2, 64, torch.float16)
    cu_q = cu([5, 9], rng.device)
    monkeypatch.setattr(_lib, "version", lambda: "0.5.0")
    with pytest.raises(RuntimeError, match=r"\(version 0\.5\.0\) has no variable-length batches .* evosdpa 0\.6\.0 "
                                           "or newer"):
        evosdpa.attention_varlen(q, k, v, cu_q, cu_q, 9, 9)


@needs_gpu
def test_no_backward_pass(rng):
    q, k, v = packed(rng, [5, 9], [5, 9], 4, 2, 64, torch.float16)
    cu_q = cu([5, 9], rng.device)
    q.requires_grad_()
    out = evosdpa.attention_varlen(q, k, v, cu_q, cu_q, 9, 9, causal=True)
    with pytest.raises(NotImplementedError, match="attention_varlen has no backward pass"):
        out.float().sum().backward()
    with torch.no_grad():
        out = evosdpa.attention_varlen(q, k, v, cu_q, cu_q, 9, 9, causal=True)
    assert not out.requires_grad


@needs_gpu
def test_torch_compile_fullgraph(rng):
    lengths_q, lengths_k = [3, 90, 1], [50, 90, 7]
    q, k, v = packed(rng, lengths_q, lengths_k, 8, 2, 128, torch.float16)
    cu_q, cu_k = cu(lengths_q, rng.device), cu(lengths_k, rng.device)

    def f(q, k, v, cu_q, cu_k):
        return evosdpa.attention_varlen(q * 2, k, v, cu_q, cu_k, 90, 90, causal=True) + 1

    eager = f(q, k, v, cu_q, cu_k)
    compiled = torch.compile(f, fullgraph=True)(q, k, v, cu_q, cu_k)
    torch.testing.assert_close(compiled, eager, rtol=0, atol=0, msg=lambda m: f"{m} [inputs from {rng!r}]")

    used = torch.tensor([2, 40, 7], dtype=torch.int32, device=rng.device)

    def g(q, k, v, cu_q, cu_k, used):  # seqused_k, a scale and the lse
        return evosdpa.attention_varlen(q, k, v, cu_q, cu_k, 90, 90, softmax_scale=0.2, seqused_k=used,
                                        return_softmax_lse=True)

    for got, want in zip(torch.compile(g, fullgraph=True)(q, k, v, cu_q, cu_k, used), g(q, k, v, cu_q, cu_k, used)):
        torch.testing.assert_close(got, want, rtol=0, atol=0, msg=lambda m: f"{m} [inputs from {rng!r}]")


@needs_gpu
def test_opcheck(rng):
    lengths_q, lengths_k = [17, 150, 0], [20, 150, 5]
    q, k, v = packed(rng, lengths_q, lengths_k, 8, 2, 64, torch.float16)
    cu_q, cu_k = cu(lengths_q, rng.device), cu(lengths_k, rng.device)
    used = torch.tensor([20, 100, 5], dtype=torch.int32, device=rng.device)
    op = torch.ops.evosdpa.attention_varlen.default
    for args in [(q, k, v, cu_q, cu_k, None, 150, 150, _lib.CAUSAL_BOTTOM_RIGHT, math.nan, True, "auto"),
                 (q, k, v, cu_q, cu_k, used, 150, 150, _lib.CAUSAL_NONE, 0.125, False, "auto"),
                 (q, k, v, cu_q, cu_k, None, 150, 150, _lib.CAUSAL_TOP_LEFT, math.nan, True, "reference")]:
        torch.library.opcheck(op, args)


@needs_gpu
def test_cuda_graph_replay_with_new_offsets(rng):
    # A packed prefill captured once with room for sequences up to 1024 tokens, replayed after the offsets
    # (and the inputs) change in place: the replay reads the new sequences from device memory.
    lengths = [5, 300, 77, 1, 700]
    total, longest = sum(lengths), 1024
    q, k, v = packed(rng, lengths, lengths, 8, 2, 128, torch.float16)
    cu_seqlens = cu(lengths, rng.device)

    def step():
        return evosdpa.attention_varlen(q, k, v, cu_seqlens, cu_seqlens, longest, longest, causal=True,
                                        return_softmax_lse=True)

    expected = step()
    graph, (out, lse) = capture_graph(step)
    out.fill_(math.nan)
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, expected[0], rtol=0, atol=0)
    torch.testing.assert_close(lse, expected[1], rtol=0, atol=0)
    for new_lengths in ([700, 5, 1, 77, 300], [0, longest, 0, total - longest, 0],
                        [1, 1, 1, total - longest - 3, longest]):
        cu_seqlens.copy_(cu(new_lengths, rng.device))
        for t in (q, k, v):
            t.copy_(rng.randn_like(t))
        out.fill_(math.nan)
        graph.replay()
        want_out, want_lse = step()
        torch.testing.assert_close(out, want_out, rtol=0, atol=0)
        torch.testing.assert_close(lse, want_lse, rtol=0, atol=0)
        check_varlen(out, lse, q, k, v, spans(new_lengths), spans(new_lengths), causal=True, rng=rng,
                     what=f"graph replay with lengths {new_lengths}")


# ---- without a GPU: the argument checks ----------------------------------------------------------------


def meta(*shape, dtype=None):
    # Tensors on the meta device carry shape, dtype and strides without memory or a GPU.
    return torch.empty(*shape, dtype=dtype or torch.float16, device="meta")


def offsets_meta(n=3, dtype=None):
    return meta(n, dtype=dtype or torch.int32)


def tensors(total_q=40, total_k=60, hq=8, hkv=2, d=64, dtype=None):
    return meta(total_q, hq, d, dtype=dtype), meta(total_k, hkv, d, dtype=dtype), meta(total_k, hkv, d, dtype=dtype)


@contextlib.contextmanager
def fake_cuda():
    """Yield a maker of fake CUDA tensors (no GPU needed)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        yield lambda *shape, dtype=torch.float16: torch.empty(shape, dtype=dtype, device="cuda")


def call(q, k, v, cu_q=None, cu_k=None, max_q=30, max_k=40, **kw):
    cu_q = offsets_meta() if cu_q is None else cu_q
    cu_k = offsets_meta() if cu_k is None else cu_k
    return evosdpa.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, **kw)


@pytest.mark.parametrize("make, exc, text", [
    (lambda: ("q",) + tensors()[1:], TypeError, "q must be a torch.Tensor"),
    (lambda: tensors(dtype=torch.float32), TypeError,
     "q has dtype torch.float32; supported with variable-length batches: torch.float16, torch.bfloat16"),
    (lambda: tensors(dtype=torch.float8_e4m3fn), TypeError, "supported with variable-length batches"),
    (lambda: (tensors()[0], meta(60, 2, 64, dtype=torch.bfloat16), meta(60, 2, 64, dtype=torch.bfloat16)),
     TypeError, "q, k, v must share a dtype"),
    (lambda: (meta(2, 40, 8, 64),) + tensors()[1:], ValueError,
     r"q must be 3-D \[total_q, Hq, D\] \(sequences packed along dimension 0\), got shape \(2, 40, 8, 64\)"),
    (lambda: (tensors()[0], meta(60, 128), meta(60, 128)), ValueError, r"k must be 3-D \[total_k, Hkv, D\]"),
    (lambda: tensors()[:2] + (meta(50, 2, 64),), ValueError, "k and v shapes differ"),
    (lambda: (meta(40, 8, 128),) + tensors()[1:], ValueError, "head_dim differs: q 128, k and v 64"),
    (lambda: tensors(d=80), ValueError, "head_dim 80 is not supported"),
    (lambda: tensors(hq=6, hkv=4), ValueError, r"q heads \(6\) must be a multiple of k/v heads \(4\)"),
    (lambda: tensors(hkv=0), ValueError, r"q heads \(8\) must be a multiple of k/v heads \(0\)"),
])
def test_bad_tensors(make, exc, text):
    q, k, v = make()
    with pytest.raises(exc, match=text):
        call(q, k, v)


def test_bad_offsets_and_lengths():
    q, k, v = tensors()
    with pytest.raises(TypeError, match="cu_seqlens_q must be int32, got torch.int64"):
        call(q, k, v, cu_q=offsets_meta(dtype=torch.int64))
    with pytest.raises(TypeError, match="cu_seqlens_k must be int32, got torch.float32"):
        call(q, k, v, cu_k=offsets_meta(dtype=torch.float32))
    with pytest.raises(TypeError, match="cu_seqlens_q must be a torch.Tensor, got list"):
        call(q, k, v, cu_q=[0, 10, 40])
    with pytest.raises(ValueError, match=r"cu_seqlens_q must be 1-D \[B \+ 1\] .* got shape \(3, 1\)"):
        call(q, k, v, cu_q=meta(3, 1, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"cu_seqlens_k must be 1-D \[B \+ 1\] .* got shape \(0,\)"):
        call(q, k, v, cu_k=offsets_meta(0))
    with pytest.raises(ValueError, match=r"cu_seqlens_k has 4 entries, cu_seqlens_q 3: both are \[B \+ 1\]"):
        call(q, k, v, cu_k=offsets_meta(4))
    with pytest.raises(TypeError, match="seqused_k must be int32, got torch.int64"):
        call(q, k, v, seqused_k=meta(2, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"seqused_k must have shape \(B,\) = \(2,\), got \(3,\)"):
        call(q, k, v, seqused_k=meta(3, dtype=torch.int32))
    with pytest.raises(TypeError, match="seqused_k must be a torch.Tensor or None, got int"):
        call(q, k, v, seqused_k=5)
    for bad in (30.0, True, "30", None, meta(1, dtype=torch.int32)):
        with pytest.raises(TypeError, match="max_seqlen_q must be an int .* got"):
            call(q, k, v, max_q=bad)
        with pytest.raises(TypeError, match="max_seqlen_k must be an int .* got"):
            call(q, k, v, max_k=bad)
    with pytest.raises(ValueError, match="max_seqlen_k must be >= 0, got -1"):
        call(q, k, v, max_k=-1)
    for bad in (float("nan"), float("inf"), 1e39):
        with pytest.raises(ValueError, match="softmax_scale must be None or a finite"):
            call(q, k, v, softmax_scale=bad)
    with pytest.raises(TypeError, match="kernel must be a string"):
        call(q, k, v, kernel=3)
    with pytest.raises(TypeError, match="takes 7 positional arguments"):  # a ported dropout_p finds no place
        evosdpa.attention_varlen(q, k, v, offsets_meta(), offsets_meta(), 30, 40, 0.0)
    # Valid options on meta tensors: every check before the device check passes.
    for kw in ({"softmax_scale": 0.0}, {"seqused_k": meta(2, dtype=torch.int32)}, {"max_q": 0, "max_k": 0},
               {"causal": True, "return_softmax_lse": True}, {"cu_q": offsets_meta(1), "cu_k": offsets_meta(1)}):
        with pytest.raises(ValueError, match="needs CUDA tensors"):
            call(q, k, v, **kw)


def test_tensors_off_the_gpu_are_refused_before_the_library(monkeypatch):
    def forward(*args):
        raise AssertionError("the library was called")

    monkeypatch.setattr(_lib, "forward", forward)
    q, k, v = (torch.zeros(40, 8, 64, dtype=torch.float16), torch.zeros(60, 2, 64, dtype=torch.float16),
               torch.zeros(60, 2, 64, dtype=torch.float16))
    offsets_cpu = torch.tensor([0, 10, 40], dtype=torch.int32)
    with pytest.raises(ValueError, match="q is on cpu; evosdpa needs CUDA tensors"):
        evosdpa.attention_varlen(q, k, v, offsets_cpu, offsets_cpu, 30, 30)
    with pytest.raises(ValueError, match="q is on cpu; evosdpa needs CUDA tensors"):  # the op itself
        torch.ops.evosdpa.attention_varlen(q, k, v, offsets_cpu, offsets_cpu, None, 30, 30, 0, math.nan, False, "auto")
    with fake_cuda() as cuda:
        q, k, v = cuda(40, 8, 64), cuda(60, 2, 64), cuda(60, 2, 64)
        offsets_gpu = cuda(3, dtype=torch.int32)
        with pytest.raises(ValueError, match="cu_seqlens_q is on cpu; evosdpa needs CUDA tensors"):
            evosdpa.attention_varlen(q, k, v, torch.zeros(3, dtype=torch.int32), offsets_gpu, 30, 30)
        with pytest.raises(ValueError, match="cu_seqlens_k is on cpu; evosdpa needs CUDA tensors"):
            evosdpa.attention_varlen(q, k, v, offsets_gpu, torch.zeros(3, dtype=torch.int32), 30, 30)
        with pytest.raises(ValueError, match="seqused_k is on cpu; evosdpa needs CUDA tensors"):
            evosdpa.attention_varlen(q, k, v, offsets_gpu, offsets_gpu, 30, 30,
                                     seqused_k=torch.zeros(2, dtype=torch.int32))


def test_accepted_forms_have_the_right_shapes():
    with fake_cuda() as cuda:
        q, k, v = cuda(40, 8, 128), cuda(300, 2, 128), cuda(300, 2, 128)
        offsets = cuda(4, dtype=torch.int32)
        out = evosdpa.attention_varlen(q, k, v, offsets, offsets, 30, 200)
        assert out.shape == (40, 8, 128) and out.dtype == torch.float16 and out.device.type == "cuda"
        out, lse = evosdpa.attention_varlen(q, k, v, offsets, offsets, 30, 200, causal=True, return_softmax_lse=True,
                                            seqused_k=cuda(3, dtype=torch.int32), softmax_scale=0.1)
        assert out.shape == (40, 8, 128) and lse.shape == (8, 40) and lse.dtype == torch.float32
        # bf16, MQA (one K/V head), no sequences (cu_seqlens [0]), empty totals.
        qb, kb = cuda(7, 4, 64, dtype=torch.bfloat16), cuda(0, 1, 64, dtype=torch.bfloat16)
        out, lse = evosdpa.attention_varlen(qb, kb, kb, cuda(1, dtype=torch.int32), cuda(1, dtype=torch.int32), 0, 0,
                                            return_softmax_lse=True)
        assert out.shape == (7, 4, 64) and out.dtype == torch.bfloat16 and lse.shape == (4, 7)
        # Strided forms the function copies (a strided last dimension, spaced offsets) or takes as they are (a
        # slice along the heads).
        q_t = cuda(40, 128, 8).transpose(-1, -2)
        spaced = cuda(8, dtype=torch.int32)[::2]
        assert q_t.stride(-1) != 1 and spaced.stride(0) == 2
        assert evosdpa.attention_varlen(q_t, k, v, spaced, spaced, 30, 200).shape == (40, 8, 128)
        heads = cuda(40, 12, 128)[:, 2:10]
        assert evosdpa.attention_varlen(heads, k, v, offsets, offsets, 30, 200).shape == (40, 8, 128)
        # The op itself requires them as the kernel reads them.
        op = torch.ops.evosdpa.attention_varlen
        with pytest.raises(ValueError, match="q must have a contiguous last dimension"):
            op(q_t, k, v, offsets, offsets, None, 30, 200, 0, math.nan, False, "auto")
        with pytest.raises(ValueError, match="cu_seqlens_q must be contiguous, got stride 2"):
            op(q, k, v, spaced, offsets, None, 30, 200, 0, math.nan, False, "auto")
        with pytest.raises(ValueError, match="seqused_k must be contiguous, got stride 2"):
            op(q, k, v, offsets, offsets, cuda(6, dtype=torch.int32)[::2], 30, 200, 0, math.nan, False, "auto")
        with pytest.raises(ValueError, match="max_seqlen_q must be >= 0, got -2"):
            op(q, k, v, offsets, offsets, None, -2, 200, 0, math.nan, False, "auto")
        with pytest.raises(ValueError, match="scale must be finite"):
            op(q, k, v, offsets, offsets, None, 30, 200, 0, math.inf, False, "auto")
        out, lse = op(q, k, v, offsets, offsets, None, 30, 200, _lib.CAUSAL_BOTTOM_RIGHT, math.nan, False, "auto")
        assert out.shape == (40, 8, 128) and lse.shape == (0,)
