"""Random gradients through evosdpa.attention (autograd into the library's fused backward pass, the
evosdpa::attention_bwd op) against float64, beyond test_torch_backward.py's fixed shapes: fp16 and bf16, head
dims 64 and 128, grouped heads, independent odd query and key lengths (decoding rows and no keys at all
included), the three causal modes, both layouts, strided and misaligned inputs and gradients of O (or, 1 in
10, a gradient of O broadcast from one row), scales (0, negative and 2 included), the deterministic and the
fast (atomic dQ) mode, each on "auto" and on one named kernel (skipped where it has no backward pass or
refuses the call: "auto" must run every call). The verdict is accuracy.check_gradients (the library's
accuracy rule, with exact zeros for rows that see no key and keys no query sees), and two backward passes of
one forward must give bitwise identical gradients: all three in the deterministic mode, dK and dV in the fast
one.

Not covered: sliding windows, softcaps, mask tensors and ALiBi, which have no backward pass (the library's
gradients cover causal masks only): 1 call in 20 checks instead that a gradient through a softcap raises
NotImplementedError. Nor FP8 inputs (no backward either) or the serving entry points (forward only).

Run by fuzz_attention.py (this module is its "backward" mode):
    python python/tests/fuzz_attention.py --what backward --seconds 240 [--seed S | --replay SEED]"""
import random

import torch

import evosdpa
from accuracy import check_gradients
from conftest import Rng
from fuzz_attention import bhsd, draw_call, view_of

# check_gradients forms several [B, Hq, Lq, Lk] tensors (scores, P, dS, in its float64 reference, its baseline
# and its magnitudes) where check_attention forms a couple: a third of fuzz_attention's cap keeps a call's
# check within seconds and a few hundred MB.
MAX_SCORES = 8_000_000


def draw(r):
    """One call's configuration from random.Random r."""
    c = draw_call(r, MAX_SCORES)
    c["deterministic"] = r.random() < 0.5
    c["dout_broadcast"] = r.random() < 0.1  # one row of dO expanded to all (strides 0), else dO in c["view"]
    c["softcap_raises"] = r.random() < 0.05  # also check that a gradient through a softcap is refused
    c["kernel"] = r.choice(evosdpa.kernel_names())
    return c


def bits(t):
    """t's bit patterns: "bitwise identical" also for NaN (never equal to itself) and -0 (equal to 0)."""
    return t.view(torch.int16)


def run_one(seed):
    """Draw configuration and inputs from `seed`, take the gradients on auto and the drawn kernel and check
    each; returns a list of failure descriptions (empty when all passed)."""
    r = random.Random(seed)
    c = draw(r)
    rng = Rng(seed)
    b, hq, hkv, lq, lk, d, dt, layout = c["b"], c["hq"], c["hkv"], c["lq"], c["lk"], c["d"], c["dtype"], c["layout"]
    q0, k0 = rng.randn(b, hq, lq, d, dtype=dt), rng.randn(b, hkv, lk, d, dtype=dt)
    v0, dout0 = rng.randn(b, hkv, lk, d, dtype=dt), rng.randn(b, hq, lq, d, dtype=dt)
    q, k, v = (view_of(t, layout, c["view"], rng) for t in (q0, k0, v0))
    if c["dout_broadcast"]:
        # The dO of (out * w).sum() with w of shape [D]: the op hands its strides (0, 0, 0, 1) to the kernels.
        dout0 = dout0[:1, :1, :1].expand(b, hq, lq, d)
        dout = bhsd(dout0, layout)  # the transposition is its own inverse: BHSD -> the layout's order
    else:
        # dO takes the inputs' view: a strided one is read in place, a misaligned one copied by the op.
        dout = view_of(dout0, layout, c["view"], rng)
    # detach(): leaves of their own with the views' strides and offsets (a plain BHSD view is q0 itself,
    # which the float64 reference then reads without an autograd graph).
    leaves = tuple(t.detach().requires_grad_() for t in (q, k, v))
    causal, alignment = c["causal"] is not None, c["causal"] or "top_left"
    kwargs = dict(causal=causal, causal_alignment=alignment, scale=c["scale"], layout=layout,
                  deterministic=c["deterministic"])
    failures = []
    for kernel in dict.fromkeys(("auto", c["kernel"])):
        try:
            out = evosdpa.attention(*leaves, kernel=kernel, **kwargs)
            # Two backward passes of one forward (retain_graph keeps its saved tensors), so that a difference
            # between them is the backward's own.
            runs = [torch.autograd.grad(out, leaves, dout, retain_graph=True) for _ in range(2)]
        except (ValueError, evosdpa.EvosdpaError) as e:
            if kernel != "auto" and isinstance(e, ValueError):
                continue  # a named kernel that does not take this call or has no backward ("auto" ran it, first)
            failures.append(f"seed {seed} {kernel}: raised {type(e).__name__}: {e}\n  {c}")
            continue
        grads = runs[0]
        # A strided or misaligned leaf gets a gradient of its own shape (check_gradients sees BHSD views only).
        wrong = [f"d{n} {tuple(g.shape)} for {n} {tuple(x.shape)}" for n, g, x in zip("qkv", grads, leaves)
                 if g.shape != x.shape]
        if wrong:
            failures.append(f"seed {seed} {kernel}: gradients of the wrong shape: {', '.join(wrong)}\n  {c}")
            continue
        # Bitwise repeatable: all three in the deterministic mode, dK and dV in the fast one too (attention()'s
        # promise: only dQ is summed with atomics).
        repeatable = zip("qkv", *runs) if c["deterministic"] else zip("kv", *(g[1:] for g in runs))
        differ = [f"d{n}" for n, g, again in repeatable if not torch.equal(bits(g), bits(again))]
        if differ:
            failures.append(f"seed {seed} {kernel}: {', '.join(differ)} differ between two backward passes\n  {c}")
        try:
            check_gradients(tuple(bhsd(g, layout) for g in grads), q0, k0, v0, dout0, causal=causal,
                            alignment=alignment, scale=c["scale"], rng=rng, what=f"{kernel} {c}")
        except AssertionError as e:
            failures.append(f"seed {seed} {kernel}: {e}")
    if c["softcap_raises"]:
        out = evosdpa.attention(*leaves, softcap=30.0, **kwargs)
        try:
            torch.autograd.grad(out, leaves, dout)
            failures.append(f"seed {seed} auto: a gradient through softcap=30 did not raise NotImplementedError\n  {c}")
        except NotImplementedError:
            pass  # the library has no backward pass for a softcap, and says so
    return failures
