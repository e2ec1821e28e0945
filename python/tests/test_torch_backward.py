"""Autograd through evosdpa: the fused backward pass (evosdpa::attention_bwd) against float64 gradients
under the library's accuracy rule (accuracy.check_gradients), bitwise repeatability of the deterministic
mode, torch.compile(fullgraph=True) of forward and backward, opcheck of both ops, and a small transformer
trained with evosdpa.scaled_dot_product_attention beside PyTorch's SDPA.

The first tests need only PyTorch (the accuracy helper on a CPU model of a fused backward, and the ops'
argument checks under FakeTensorMode); the rest need a GPU and a library with the backward pass (C ABI
0.4). Every random input of a GPU test comes from the `rng` fixture (conftest.py): seeded from
EVOSDPA_TEST_SEED when set, else fresh, and named in the failure report to replay it."""
import contextlib
import math

import pytest

from conftest import HAVE_TORCH, Rng, launched_kernels, needs_gpu, needs_torch

if HAVE_TORCH:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    from accuracy import check_gradients, effective_scale, visible_mask

import evosdpa

# ---- without a GPU -------------------------------------------------------------------------------------


def tiled_backward(q, k, v, dout, causal=False, alignment="top_left", scale=None, block=64):
    """What a correct fused backward computes, on the CPU: P and dS recomputed per key tile from O and lse
    as a forward stores them, float32 accumulation tile by tile (another summation order than the
    baseline's), P and dS rounded to the dtype for the products. (dq, dk, dv) in q.dtype; q: [B, Hq, Lq, D]."""
    from test_accuracy_helper import tiled_attention

    o, lse = tiled_attention(q, k, v, causal, alignment, scale)
    group = q.shape[1] // k.shape[1]
    ke, ve = k.repeat_interleave(group, 1).float(), v.repeat_interleave(group, 1).float()
    sc = effective_scale(scale, q.shape[-1])
    mask = visible_mask(q.shape[2], k.shape[2], causal, alignment, q.device)
    delta = (dout.float() * o.float()).sum(-1, keepdim=True)
    dq = torch.zeros(q.shape, dtype=torch.float32)
    dk, dv = torch.zeros(ke.shape), torch.zeros(ve.shape)
    for j in range(0, k.shape[2], block):
        cols = slice(j, j + block)
        s = (q.float() @ ke[:, :, cols].transpose(-1, -2)) * sc
        p = torch.where(mask[:, cols], torch.exp(s - lse[..., None]), 0.0)
        ds = p * (dout.float() @ ve[:, :, cols].transpose(-1, -2) - delta)
        ds_r, p_r = ds.to(q.dtype).float(), p.to(q.dtype).float()
        dq += ds_r @ ke[:, :, cols]
        dk[:, :, cols] = ds_r.transpose(-1, -2) @ q.float()
        dv[:, :, cols] = p_r.transpose(-1, -2) @ dout.float()
    b, hk = k.shape[:2]
    dk, dv = (t.reshape(b, hk, group, *t.shape[2:]).sum(2) for t in (dk, dv))
    return (dq * sc).to(q.dtype), (dk * sc).to(q.dtype), dv.to(q.dtype)


HELPER_CASES = [  # (Hq, Hkv, Lq, Lk, D, causal, alignment, scale)
    (2, 2, 150, 150, 64, False, "top_left", None),
    (4, 2, 70, 200, 128, True, "bottom_right", -0.4),
    (2, 1, 200, 70, 64, True, "bottom_right", None),  # query rows with no visible key, grouped heads
    (2, 2, 130, 97, 64, True, "top_left", 0.0),
]


@needs_torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", HELPER_CASES, ids=str)
def test_a_correct_fused_backward_passes_the_gradient_rule(case, dtype):
    hq, hkv, lq, lk, d, causal, alignment, scale = case
    dt = getattr(torch, dtype)
    rng = Rng(4321, device="cpu")
    q, k, v = rng.randn(1, hq, lq, d, dtype=dt), rng.randn(1, hkv, lk, d, dtype=dt), rng.randn(1, hkv, lk, d, dtype=dt)
    dout = rng.randn(1, hq, lq, d, dtype=dt)
    grads = tiled_backward(q, k, v, dout, causal, alignment, scale)
    check_gradients(grads, q, k, v, dout, causal=causal, alignment=alignment, scale=scale, rng=rng)


@needs_torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_planted_backward_bugs_fail(dtype):
    dt = getattr(torch, dtype)
    rng = Rng(77, device="cpu")
    q, k, v = rng.randn(1, 4, 96, 64, dtype=dt), rng.randn(1, 2, 80, 64, dtype=dt), rng.randn(1, 2, 80, 64, dtype=dt)
    dout = rng.randn(1, 4, 96, 64, dtype=dt)
    args = dict(causal=True, alignment="bottom_right")
    dq, dk, dv = tiled_backward(q, k, v, dout, **args)
    check_gradients((dq, dk, dv), q, k, v, dout, rng=rng, **args)

    def fails(grads, text=r"inputs from EVOSDPA_TEST_SEED=77"):
        with pytest.raises(AssertionError, match=text):
            check_gradients(grads, q, k, v, dout, rng=rng, **args)

    fails(tiled_backward(q, k, v, dout, True, "top_left"))                  # wrong causal alignment
    fails(tiled_backward(q, k, v, dout, False))                             # mask ignored
    fails(tiled_backward(q, k, v, dout, True, "bottom_right", scale=0.2))   # scale not applied
    fails((dq * 2, dk, dv), "dq")                                           # dq off
    fails((dq, dk, dv.flip(-2)), "dv")                                      # keys swapped
    fails((dq, dk[:, :1].expand_as(dk), dv), "dk")                          # one K/V head's sum for both
    for poison in (math.nan, math.inf):
        bad = dk.clone()
        bad[0, 1, 5, 3] = poison
        fails((dq, bad, dv), "dk")
    keyless = dq.clone()  # rows 0..15 see no key (Lq 96 > Lk 80, bottom-right)
    keyless[0, 0, 3, 0] = 2.0**-20
    fails((keyless, dk, dv), "dq is not exactly 0 on the 16 rows that see no key")
    fails((dq.float(), dk, dv), "dq is .* torch.float32")


@contextlib.contextmanager
def fake_cuda():
    """Yield a maker of fake CUDA tensors (no GPU needed)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        yield lambda *shape, dtype=torch.float16: torch.empty(shape, dtype=dtype, device="cuda")


@needs_torch
def test_backward_op_shapes_and_argument_checks():
    # The fake implementation runs the real one's checks: shapes, dtypes, lse's form, FP8.
    with fake_cuda() as cuda:
        q, k = cuda(2, 33, 8, 64), cuda(2, 40, 2, 64)  # BSHD, grouped heads
        o, lse = torch.ops.evosdpa.attention_fwd(q, k, k, 0, math.nan, True, "bshd", "auto")
        strided = cuda(2, 33, 64, 8).transpose(-1, -2)  # dout with a strided last dimension is copied
        dq, dk, dv = torch.ops.evosdpa.attention_bwd(strided, q, k, k, o, lse, 2, math.nan, "bshd", "auto", False)
        assert dq.shape == q.shape and dk.shape == dv.shape == k.shape and dq.is_contiguous()
        bad = {"lse": (lse[:, :, :3], ValueError, "lse must be the forward's contiguous float32"),
               "o": (o.float(), ValueError, "o must have q's shape and dtype"),
               "dout": (q[:, :3], ValueError, "dout must have q's shape and dtype")}
        for name, (value, exc, text) in bad.items():
            args = dict(dout=o, q=q, k=k, v=k, o=o, lse=lse)
            args[name] = value
            with pytest.raises(exc, match=text):
                torch.ops.evosdpa.attention_bwd(*args.values(), 0, math.nan, "bshd", "auto", True)
        with pytest.raises(ValueError, match="scale must be finite"):
            torch.ops.evosdpa.attention_bwd(o, q, k, k, o, lse, 0, math.inf, "bshd", "auto", True)
        q8 = cuda(2, 33, 8, 64, dtype=torch.float8_e4m3fn)
        with pytest.raises(NotImplementedError, match="no backward pass for float8_e4m3fn"):
            torch.ops.evosdpa.attention_bwd(o, q8, q8, q8, o, lse, 0, math.nan, "bshd", "auto", True)


@needs_torch
def test_lse_is_requested_only_when_a_gradient_is_needed():
    with fake_cuda() as cuda:
        q = cuda(1, 2, 16, 64)
        out = evosdpa.attention(q, q, q)
        assert not out.requires_grad
        qg = q.clone().requires_grad_()
        out, lse = evosdpa.attention(qg, q, q, return_lse=True)
        assert out.requires_grad and not lse.requires_grad  # lse is not differentiable
        with torch.no_grad():
            assert not evosdpa.attention(qg, q, q).requires_grad


# ---- on a GPU ------------------------------------------------------------------------------------------

# The kernels whose backward the tests name: the fastest ("auto": wgmma_sm90 on Hopper, else mma_sm80),
# the baseline, and on Hopper mma_sm80 too.
HOPPER = HAVE_TORCH and torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9
KERNELS = ["auto", "reference"] + (["mma_sm80"] if HOPPER else [])


def to_layout(t, layout):
    return t if layout == "bhsd" else t.transpose(1, 2).contiguous()


def from_layout(t, layout):
    return t if layout == "bhsd" else t.transpose(1, 2)


CASES = [
    # (B, Hq, Hkv, Lq, Lk, D, causal, alignment)
    (1, 4, 4, 128, 128, 64, False, "top_left"),
    (2, 8, 2, 333, 333, 128, True, "top_left"),       # grouped heads, odd length
    (1, 2, 2, 1, 333, 64, True, "bottom_right"),      # one query row, seeing every key
    (1, 2, 2, 17, 17, 128, False, "top_left"),
    (1, 8, 2, 127, 300, 64, True, "bottom_right"),    # Lq < Lk
    (1, 8, 2, 300, 127, 128, True, "bottom_right"),   # Lq > Lk: the first 173 query rows see no key
    (1, 2, 2, 100, 333, 64, True, "top_left"),
    (1, 2, 2, 333, 100, 128, True, "top_left"),
    (2, 4, 4, 512, 512, 64, True, "top_left"),
    (1, 2, 1, 257, 2, 64, False, "top_left"),
    # A single visible key: dQ and dK are exactly 0 in float64 (accuracy.FP32_ROUNDINGS says why they pass).
    (1, 2, 2, 129, 1, 64, False, "top_left"),
    (1, 2, 1, 1, 129, 128, True, "top_left"),
]


def case_id(c):
    return "b{}h{}x{}_q{}k{}_d{}_{}".format(*c[:6], c[7] if c[6] else "full")


def gradients_of(q, k, v, dout, layout="bhsd", **kw):
    """(dq, dk, dv) of evosdpa.attention of BHSD q, k, v passed in `layout`, for the gradient dout; BHSD."""
    leaves = [to_layout(t, layout).clone().requires_grad_() for t in (q, k, v)]
    evosdpa.attention(*leaves, layout=layout, **kw).backward(to_layout(dout, layout))
    return tuple(from_layout(t.grad, layout) for t in leaves)


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("deterministic", [True, False], ids=["deterministic", "fast"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_gradients_match_float64(case, layout, dtype, deterministic, kernel, rng):
    b, hq, hkv, lq, lk, d, causal, alignment = case
    dt = getattr(torch, dtype)
    q, k, v = rng.randn(b, hq, lq, d, dtype=dt), rng.randn(b, hkv, lk, d, dtype=dt), rng.randn(b, hkv, lk, d, dtype=dt)
    dout = rng.randn(b, hq, lq, d, dtype=dt)
    grads = gradients_of(q, k, v, dout, layout, causal=causal, causal_alignment=alignment, kernel=kernel,
                         deterministic=deterministic)
    check_gradients(grads, q, k, v, dout, causal=causal, alignment=alignment, rng=rng)


@needs_gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("scale", [0.3, -0.5, 0.0])
def test_gradients_with_large_magnitudes_and_explicit_scales(scale, dtype, rng):
    # q, k ~ N(0, 36): peaked softmax rows, where P rounds to 0 or 1 and dS is small against dP.
    dt = getattr(torch, dtype)
    q, k = rng.randn(2, 4, 333, 128, dtype=dt, std=6.0), rng.randn(2, 2, 400, 128, dtype=dt, std=6.0)
    v, dout = rng.randn(2, 2, 400, 128, dtype=dt), rng.randn(2, 4, 333, 128, dtype=dt)
    for causal, alignment in ((False, "top_left"), (True, "bottom_right")):
        grads = gradients_of(q, k, v, dout, causal=causal, causal_alignment=alignment, scale=scale)
        check_gradients(grads, q, k, v, dout, causal=causal, alignment=alignment, scale=scale, rng=rng,
                        what=f"causal={causal} {alignment}")


def misaligned(x):
    """A copy of x at a 2-byte offset in rows of D + 1 elements: pointer and strides not 16-byte aligned."""
    padded = torch.empty(*x.shape[:-1], x.shape[-1] + 1, dtype=x.dtype, device=x.device)
    return padded[..., 1:].copy_(x)


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
def test_strided_and_misaligned_inputs(kernel, rng):
    dt = torch.bfloat16
    bhsd = (lambda x: x.transpose(1, 2))  # BSHD -> BHSD view
    # Packed qkv: BSHD views with the strides of a larger tensor; the gradients reach it through autograd.
    packed = rng.randn(2, 300, 4, 3, 64, dtype=dt).requires_grad_()
    q, k, v = packed.unbind(3)
    dout = rng.randn(2, 300, 4, 64, dtype=dt)
    evosdpa.attention(q, k, v, layout="bshd", causal=True, kernel=kernel).backward(dout)
    grads = tuple(bhsd(g) for g in packed.grad.unbind(3))
    check_gradients(grads, bhsd(q), bhsd(k), bhsd(v), bhsd(dout), causal=True, rng=rng, what="packed qkv")
    # Inputs and dout not 16-byte aligned: the ops copy them to rows the tensor-core kernels read (which refuse
    # misaligned rows), so every kernel runs them and "auto" does not fall back to the reference kernel.
    q, k, v, dout = (rng.randn(1, 4, 200, 64, dtype=dt) for _ in range(4))
    leaves = [misaligned(t).requires_grad_() for t in (q, k, v)]
    dout_m = misaligned(dout)
    assert all(t.data_ptr() % 16 for t in (*leaves, dout_m))
    with launched_kernels() as ran:
        evosdpa.attention(*leaves, causal=True, causal_alignment="bottom_right", kernel=kernel).backward(dout_m)
    check_gradients(tuple(t.grad for t in leaves), q, k, v, dout, causal=True, alignment="bottom_right", rng=rng,
                    what="misaligned")
    if kernel == "auto":
        assert ran and all(name != "reference" for name, _ in ran), ran
    # The gradient of a slice of a concatenation: dout's rows D + 3 elements apart (as torch.cat([o, x], -1)
    # makes them), which left the whole backward to the reference kernel before the op copied it.
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    with launched_kernels() as ran:
        o = evosdpa.attention(*leaves, kernel=kernel)
        extra = torch.zeros(*o.shape[:-1], 3, dtype=dt, device=o.device)
        torch.cat([o, extra], -1).backward(torch.cat([dout, extra], -1))
    check_gradients(tuple(t.grad for t in leaves), q, k, v, dout, rng=rng, what="dout of a concatenation")
    if kernel == "auto":
        assert ran and all(name != "reference" for name, _ in ran), ran
    # The gradient of out.sum(): one 1 expanded to O's shape (strides 0), copied for the kernels that read
    # dO through tensor maps: on Hopper "auto" runs wgmma_sm90's backward, not mma_sm80's.
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    with launched_kernels() as ran:
        evosdpa.attention(*leaves, causal=True, kernel=kernel).sum().backward()
    check_gradients(tuple(t.grad for t in leaves), q, k, v, torch.ones_like(dout), causal=True, rng=rng,
                    what="dout of out.sum()")
    if kernel == "auto" and torch.cuda.get_device_capability()[0] == 9:
        assert [name for name, _ in ran] == ["wgmma_sm90", "wgmma_sm90"], ran
    # A strided last dimension (a transposed view): copied by evosdpa.attention, its gradient comes back.
    qt = rng.randn(1, 4, 64, 200, dtype=dt).transpose(-1, -2).requires_grad_()
    kv = [t.clone().requires_grad_() for t in (k, v)]
    evosdpa.attention(qt, *kv, kernel=kernel).backward(dout)
    check_gradients((qt.grad, kv[0].grad, kv[1].grad), qt, k, v, dout, rng=rng, what="transposed q")


@needs_gpu
def test_sdpa_drop_in_gradients(rng):
    # PyTorch's shapes: 3-D (H, L, E) and 5-D grouped heads; the gradients come back in the inputs' shapes.
    dt = torch.float16
    q3, k3, v3 = (rng.randn(4, 200, 64, dtype=dt).requires_grad_() for _ in range(3))
    dout3 = rng.randn(4, 200, 64, dtype=dt)
    evosdpa.scaled_dot_product_attention(q3, k3, v3, is_causal=True).backward(dout3)
    check_gradients((q3.grad, k3.grad, v3.grad), q3, k3, v3, dout3, causal=True, rng=rng, what="3-D")
    q5 = rng.randn(2, 3, 4, 150, 128, dtype=dt).requires_grad_()
    k5, v5 = (rng.randn(2, 3, 2, 90, 128, dtype=dt).requires_grad_() for _ in range(2))
    dout5 = rng.randn(2, 3, 4, 150, 128, dtype=dt)
    evosdpa.scaled_dot_product_attention(q5, k5, v5, is_causal=True, enable_gqa=True, scale=0.2).backward(dout5)
    assert q5.grad.shape == q5.shape and k5.grad.shape == k5.shape
    check_gradients((q5.grad, k5.grad, v5.grad), q5, k5, v5, dout5, causal=True, scale=0.2, rng=rng,
                    what="5-D enable_gqa")


@needs_gpu
def test_empty_and_keyless(rng):
    # No keys at all: dq = 0; no queries: dk = dv = 0.
    q = rng.randn(1, 2, 5, 64, dtype=torch.float16).requires_grad_()
    kv = rng.randn(1, 2, 0, 64, dtype=torch.float16).requires_grad_()
    evosdpa.attention(q, kv, kv).backward(torch.ones(1, 2, 5, 64, dtype=torch.float16, device="cuda"))
    assert torch.equal(q.grad, torch.zeros_like(q)) and kv.grad.shape == kv.shape
    q0 = rng.randn(1, 2, 0, 64, dtype=torch.float16).requires_grad_()
    k, v = (rng.randn(1, 2, 9, 64, dtype=torch.float16).requires_grad_() for _ in range(2))
    evosdpa.attention(q0, k, v).sum().backward()
    assert torch.equal(k.grad, torch.zeros_like(k)) and torch.equal(v.grad, torch.zeros_like(v))


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("deterministic", [True, False], ids=["deterministic", "fast"])
def test_no_query_heads_give_zero_key_gradients(kernel, deterministic, rng):
    # Hq = 0 is a multiple of Hkv = 2: no query sees any key, so dK = dV = 0 (evosdpa.h), as with Lq = 0. The
    # library used to return without writing them (no query heads counted as no work), leaving whatever
    # torch.empty's memory held: blocks of their size are NaN-filled and freed first, so that stale memory shows.
    q = rng.randn(2, 0, 50, 64, dtype=torch.float16).requires_grad_()
    k, v = (rng.randn(2, 2, 100, 64, dtype=torch.float16).requires_grad_() for _ in range(2))
    poison = [torch.full_like(k, math.nan) for _ in range(8)]
    del poison
    out = evosdpa.attention(q, k, v, kernel=kernel, deterministic=deterministic)
    assert out.shape == (2, 0, 50, 64)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), torch.empty_like(out))
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    assert torch.equal(dk, torch.zeros_like(k)) and torch.equal(dv, torch.zeros_like(v)), (
        f"dK, dV not zero without query heads: {dk.isnan().sum().item()} and {dv.isnan().sum().item()} NaN")


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
def test_deterministic_mode_is_bitwise_repeatable(kernel, rng):
    q = rng.randn(2, 8, 1000, 128, dtype=torch.bfloat16).requires_grad_()
    k, v = (rng.randn(2, 2, 1000, 128, dtype=torch.bfloat16).requires_grad_() for _ in range(2))
    dout = rng.randn(2, 8, 1000, 128, dtype=torch.bfloat16)
    for deterministic in (True, False):
        out = evosdpa.attention(q, k, v, causal=True, kernel=kernel, deterministic=deterministic)
        first = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        for _ in range(99):
            again = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
            # dK and dV are repeatable in both modes; dQ only in the deterministic one (FAST sums it with
            # atomics in any order).
            checked = zip("qkv", first, again) if deterministic else zip("kv", first[1:], again[1:])
            for name, a, b in checked:
                assert torch.equal(a, b), f"d{name} differs between runs (deterministic={deterministic}) [{rng!r}]"
        check_gradients(first, q, k, v, dout, causal=True, rng=rng, what=f"deterministic={deterministic}")


@needs_gpu
def test_named_kernels(rng):
    # Each kernel by name runs its own backward pass, or says it has none (never a silent fallback).
    q, k, v, dout = (rng.randn(1, 4, 333, 64, dtype=torch.float16) for _ in range(4))
    ran = []
    for name in evosdpa.kernel_names():
        if name == "mma_fp8_sm89" or (name == "wgmma_sm90" and torch.cuda.get_device_capability()[0] != 9):
            continue  # FP8 inputs only; Hopper only
        try:
            grads = gradients_of(q, k, v, dout, causal=True, kernel=name)
        except ValueError as e:
            assert f"{name}: has no backward pass" in str(e), str(e)
            continue
        check_gradients(grads, q, k, v, dout, causal=True, rng=rng, what=f"kernel {name}")
        ran.append(name)
    assert {"mma_sm80", "reference"} | ({"wgmma_sm90"} if HOPPER else set()) <= set(ran), ran


@needs_gpu
# make_graphed_callables warns so in PyTorch 2.11 for its own F.scaled_dot_product_attention as well.
@pytest.mark.filterwarnings("ignore:The AccumulateGrad node's stream does not match:UserWarning")
def test_cuda_graph_of_forward_and_backward(rng):
    # The backward's workspace comes from PyTorch's allocator and nothing synchronises: both passes capture.
    q, k, v = (rng.randn(2, 4, 300, 128, dtype=torch.bfloat16).requires_grad_() for _ in range(3))
    dout = rng.randn(2, 4, 300, 128, dtype=torch.bfloat16)

    def f(q, k, v):
        return evosdpa.attention(q, k, v, causal=True)

    graphed = torch.cuda.make_graphed_callables(f, (q, k, v))
    graphed(q, k, v).backward(dout)  # a replay of both graphs
    eager = torch.autograd.grad(f(q, k, v), (q, k, v), dout)
    for name, replayed, want in zip("qkv", (q.grad, k.grad, v.grad), eager):
        assert torch.equal(replayed, want), f"d{name} from the graph differs from eager [{rng!r}]"


@needs_gpu
def test_torch_compile_fullgraph_forward_and_backward(rng):
    q, k, v = (rng.randn(2, 4, 256, 128, dtype=torch.float16) for _ in range(3))
    w = rng.randn(2, 4, 256, 128, dtype=torch.float32)

    def loss(q, k, v):
        out = evosdpa.attention(q * 2, k, v, causal=True, causal_alignment="bottom_right")
        return (out.float() * w).sum()

    def sdpa_loss(q, k, v):  # the drop-in, with grouped heads
        out = evosdpa.scaled_dot_product_attention(q, k[:, :2], v[:, :2], is_causal=True, enable_gqa=True)
        return (out.float() * w).sum()

    for f in (loss, sdpa_loss):
        grads = []
        for fn in (f, torch.compile(f, fullgraph=True)):
            leaves = [t.clone().requires_grad_() for t in (q, k, v)]
            fn(*leaves).backward()
            grads.append([t.grad for t in leaves])
        for eager, compiled in zip(*grads):
            torch.testing.assert_close(compiled, eager, rtol=0, atol=0,
                                       msg=lambda m: f"{f.__name__}: {m} [inputs from {rng!r}]")


@needs_gpu
def test_opcheck(rng):
    q, k, v = (rng.randn(1, 4, 200, 64, dtype=torch.float16).requires_grad_() for _ in range(3))
    fwd = torch.ops.evosdpa.attention_fwd.default
    # With inputs that need gradients: the autograd formula, traced by AOTAutograd (with lse, and without:
    # then the backward computes lse again). The last argument is the backward's mode.
    torch.library.opcheck(fwd, (q, k, v, 1, math.nan, True, "bhsd", "auto"))
    torch.library.opcheck(fwd, (q, k, v, 2, 0.125, False, "bhsd", "auto", None, None, None, None, False))
    qs, ks, vs = (t.detach().transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v))
    torch.library.opcheck(fwd, (qs, ks, vs, 0, 0.0, True, "bshd", "reference"))
    o, lse = fwd(q.detach(), k.detach(), v.detach(), 1, math.nan, True, "bhsd", "auto")
    dout = rng.randn_like(o)
    bwd = torch.ops.evosdpa.attention_bwd.default
    for args in [(dout, q.detach(), k.detach(), v.detach(), o, lse, 1, math.nan, "bhsd", "auto", True),
                 (dout, q.detach(), k.detach(), v.detach(), o, lse, 1, math.nan, "bhsd", "reference", False)]:
        torch.library.opcheck(bwd, args)


@needs_gpu
def test_fp8_inputs_have_no_backward(rng):
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 inputs need compute capability 8.9 or newer")
    q8, qd = evosdpa.quantize_fp8(rng.randn(1, 2, 64, 64, dtype=torch.float32))
    qd.requires_grad_()  # descales get no gradient, and FP8 attention has no backward pass at all
    out = evosdpa.attention(q8, q8, q8, q_descale=qd, k_descale=qd, v_descale=qd)
    with pytest.raises(NotImplementedError, match="no backward pass for float8_e4m3fn"):
        out.float().sum().backward()


# ---- training ------------------------------------------------------------------------------------------

if HAVE_TORCH:
    class Block(nn.Module):
        """Pre-norm transformer block; `attention` has SDPA's signature."""

        def __init__(self, d_model, heads, attention):
            super().__init__()
            self.heads, self.attention = heads, attention
            self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.qkv, self.proj = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
            self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

        def forward(self, x):
            b, l, d = x.shape
            # q, k, v: [B, H, L, D] views of the fused projection (strided, stride 1 on head_dim).
            q, k, v = self.qkv(self.ln1(x)).view(b, l, 3, self.heads, d // self.heads).transpose(1, 3).unbind(2)
            y = self.attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, l, d))
            return x + self.mlp(self.ln2(x))

    class DecoderOnly(nn.Module):
        """Token and learned position embeddings, `layers` blocks of `heads` heads of 64, a vocabulary head."""

        def __init__(self, attention, vocab=16, d_model=256, heads=4, layers=2, length=128):
            super().__init__()
            self.embed = nn.Embedding(vocab, d_model)
            self.position = nn.Parameter(torch.randn(length, d_model) * 0.02)
            self.blocks = nn.ModuleList(Block(d_model, heads, attention) for _ in range(layers))
            self.ln, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, vocab)

        def forward(self, tokens):
            x = self.embed(tokens) + self.position[: tokens.shape[1]]
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))


def train(attention, tokens, seed):
    """Loss per step of DecoderOnly trained with `attention` (SDPA's signature) under bf16 autocast, from
    the parameters of `seed`, on the batches of `tokens` [steps, B, L+1] (next-token prediction)."""
    torch.manual_seed(seed)
    model = DecoderOnly(attention).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    losses = []
    for batch in tokens:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses).double().cpu()


def torch_sdpa(backend):
    from torch.nn.attention import sdpa_kernel

    def attention(q, k, v, is_causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    return attention


def windowed_gap(losses, reference, window):
    """Mean |losses - reference| over each window of steps."""
    return (losses - reference).abs().reshape(-1, window).mean(dim=1)


@needs_gpu
def test_training_matches_pytorch_sdpa(rng):
    # Each sequence repeats a random pattern of 8 tokens, which the model can predict only by attending 7
    # positions back: the loss falls from ln 16 to about 1 in 300 steps, through the attention's gradients.
    # evosdpa's loss curve may differ from PyTorch's flash attention's by what PyTorch's own backends
    # differ by (the larger of math's and memory-efficient attention's distance from flash attention, from
    # the same seed and data), measured here: per window of 25 steps, the mean |loss difference| within 3x
    # that yardstick plus 0.002. The curves agree to ~1e-4 until the runs' rounding differences grow
    # chaotically, late in training. Measured on an H100 over 5 seeds: evosdpa within 0.42 of the bound,
    # while a backward that scaled dQ by 0.9, dK by 1.1 or dV by 0.95 exceeded it 1.2-7x.
    from torch.nn.attention import SDPBackend

    steps, batch, window = 300, 16, 25
    pattern = torch.randint(0, 16, (steps, batch, 8), generator=rng.generator, device="cuda")
    tokens = pattern.repeat(1, 1, 17)[..., :129]  # [steps, B, 129]: 128 inputs and their next tokens
    seed = rng.seed % 2**31
    flash = train(torch_sdpa(SDPBackend.FLASH_ATTENTION), tokens, seed)
    yardstick = torch.maximum(*(windowed_gap(train(torch_sdpa(b), tokens, seed), flash, window)
                                for b in (SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION)))
    ours = train(evosdpa.scaled_dot_product_attention, tokens, seed)
    assert ours.isfinite().all() and ours[-window:].mean() < ours[:window].mean() - 0.5, (
        f"no learning: losses {ours[::window].tolist()} [{rng!r}]")
    gap = windowed_gap(ours, flash, window)
    report = "\n".join(f"steps {i * window}-{(i + 1) * window - 1}: |evosdpa - flash| {a:.4f}, PyTorch's spread "
                       f"{b:.4f}, loss {ours[(i + 1) * window - 1]:.3f}"
                       for i, (a, b) in enumerate(zip(gap, yardstick)))
    assert (gap <= 3 * yardstick + 0.002).all(), (
        f"loss curves apart beyond 3x PyTorch's own spread + 0.002 [{rng!r}]:\n{report}")
