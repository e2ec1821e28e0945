"""Random evosdpa.attention calls against float64, beyond the suite's fixed shapes: shapes (decoding rows to
a few thousand, odd lengths), grouped heads, both layouts, strided and misaligned views, the three causal
modes, scales (0 and negative included), sliding windows, softcaps, mask tensors of every broadcast shape,
ALiBi and the lse, each on "auto" and on one named kernel that takes it. The verdict is accuracy.py's rule
(the library's own), with the window, the mask and ALiBi built here from evosdpa.h's formulas.

--what picks the calls: "forward" (these), "backward" (gradients, fuzz_backward.py), "kvcache" and "varlen"
(the serving entry points, fuzz_serving.py), or "all" (seed s runs the mode s % 4, in that order).

A GPU tool, not collected by pytest (its name does not start with test_):
    python python/tests/fuzz_attention.py --seconds 240 [--seed S] [--what all]
Each call draws its configuration and inputs from one seed (printed with a failure, so that
`--what MODE --replay SEED` runs that call alone); exit status 1 if any call failed."""
import argparse
import random
import sys
import time
import traceback

import torch

import evosdpa
from accuracy import check_attention
from conftest import Rng

DTYPES = (torch.float16, torch.bfloat16)
# Keep the float64 reference (B * Hq * Lq * Lk scores) within a few hundred MB.
MAX_SCORES = 24_000_000


def length(r):
    """Decoding rows, short and long sequences; odd lengths are most of them."""
    band = r.random()
    if band < 0.25:
        return r.randint(1, 16)
    if band < 0.75:
        return r.randint(17, 600)
    return r.randint(601, 2100)


def draw_call(r, max_scores):
    """What every mode with [B, H, L, D] tensors draws from random.Random r: dtype, head dim, batch, heads
    (grouped), lengths (B Hq Lq Lk at most max_scores), causal mode, layout, view and scale."""
    while True:
        c = dict(dtype=r.choice(DTYPES), d=r.choice((64, 128)), b=r.randint(1, 3), hkv=r.randint(1, 4),
                 group=r.choice((1, 1, 2, 3, 4)), lq=length(r))
        # Keys: a length of their own (7 in 10), else self-attention (Lk = Lq) or, 1 in 10 of those, none.
        c["lk"] = length(r) if r.random() < 0.7 else (c["lq"] if r.random() < 0.9 else 0)
        c["hq"] = c["hkv"] * c["group"]
        if c["b"] * c["hq"] * c["lq"] * max(c["lk"], 1) <= max_scores:
            break
    c["causal"] = r.choice((None, "top_left", "bottom_right"))
    c["layout"] = r.choice(("bhsd", "bshd"))
    c["view"] = r.choices(("plain", "strided", "misaligned"), (6, 3, 1))[0]
    c["scale"] = r.choices((None, round(r.uniform(-1.0, 1.0), 3), 0.0, 2.0), (6, 2, 1, 1))[0]
    return c


def draw(r):
    """One call's configuration from random.Random r."""
    c = draw_call(r, MAX_SCORES)
    c["window"] = None
    if r.random() < 0.25:
        bound = lambda: r.choice((-1, 0, 1, r.randint(2, c["lk"] + 8)))  # noqa: E731
        left, right = bound(), bound()
        c["window"] = (left, right) if (left, right) != (-1, -1) else (0, -1)
    c["softcap"] = r.choice((10.0, 30.0, 50.0, 500.0)) if r.random() < 0.2 else 0.0
    c["mask"] = None
    if r.random() < 0.25:
        c["mask"] = (r.choice(("bool", "additive")), r.choice((1, c["b"])), r.choice((1, c["hq"])),
                     r.choice((1, c["lq"])))
    c["alibi"] = r.choice(("heads", "batch")) if r.random() < 0.15 else None
    c["lse"] = r.random() < 0.5
    c["kernel"] = r.choice(evosdpa.kernel_names())
    return c


def view_of(x, layout, how, rng):
    """x ([B, H, L, D], float) as the call's input: in `layout`, plainly, as a slice of a larger tensor (outer
    strides of a packed or padded buffer), or misaligned (rows D + 1 elements apart, 2 bytes off)."""
    t = x if layout == "bhsd" else x.transpose(1, 2).contiguous()
    if how == "strided":
        big = rng.randn(*t.shape[:2], t.shape[2] + 3, t.shape[3], dtype=t.dtype)  # 3 more heads or rows
        big[:, :, : t.shape[2]] = t
        t = big[:, :, : t.shape[2]]
    elif how == "misaligned":
        big = torch.empty(*t.shape[:-1], t.shape[-1] + 1, dtype=t.dtype, device=t.device)
        t = big[..., 1:].copy_(t)
    return t


def bhsd(t, layout):
    return t if layout == "bhsd" else t.transpose(1, 2)


def run_one(seed):
    """Draw configuration and inputs from `seed`, run auto and the drawn kernel, check each; returns a list of
    failure descriptions (empty when all passed)."""
    r = random.Random(seed)
    c = draw(r)
    rng = Rng(seed)
    b, hq, hkv, lq, lk, d, dt = c["b"], c["hq"], c["hkv"], c["lq"], c["lk"], c["d"], c["dtype"]
    q0, k0, v0 = rng.randn(b, hq, lq, d, dtype=dt), rng.randn(b, hkv, lk, d, dtype=dt), rng.randn(b, hkv, lk, d, dtype=dt)
    q, k, v = (view_of(t, c["layout"], c["view"], rng) for t in (q0, k0, v0))
    causal, alignment = c["causal"] is not None, c["causal"] or "top_left"
    # The diagonal evosdpa.h places windows and ALiBi on: key i under a top-left causal mask, else i + Lk - Lq.
    offset = 0 if c["causal"] == "top_left" else lk - lq
    i = torch.arange(lq, device="cuda")[:, None]
    j = torch.arange(lk, device="cuda")[None, :]
    visible, bias, kwargs = None, None, {}
    if c["window"] is not None:
        left, right = c["window"]
        visible = torch.ones(lq, lk, dtype=torch.bool, device="cuda")
        if left >= 0:
            visible &= j >= i + offset - left
        if right >= 0:
            visible &= j <= i + offset + right
        kwargs["window_size"] = c["window"]
    if c["softcap"]:
        kwargs["softcap"] = c["softcap"]
    if c["mask"] is not None:
        kind, mb, mh, mq = c["mask"]
        if kind == "bool":
            m = torch.rand(mb, mh, mq, lk, generator=rng.generator, device="cuda") > 0.25
            visible = m if visible is None else visible & m
        else:
            m = rng.randn(mb, mh, mq, lk, dtype=dt)
            m = m.masked_fill(torch.rand(mb, mh, mq, lk, generator=rng.generator, device="cuda") < 0.1, float("-inf"))
            bias = m.double()
        kwargs["attn_mask"] = m
    if c["alibi"] is not None:
        shape = (hq,) if c["alibi"] == "heads" else (b, hq)
        slopes = torch.rand(shape, generator=rng.generator, device="cuda") * 0.5 + 0.01
        alibi = -slopes.double()[..., None, None] * (i + offset - j).abs().double()
        bias = alibi if bias is None else bias + alibi
        kwargs["alibi_slopes"] = slopes
    failures = []
    for kernel in dict.fromkeys(("auto", c["kernel"])):
        try:
            out = evosdpa.attention(q, k, v, causal=causal, causal_alignment=alignment, scale=c["scale"],
                                    return_lse=c["lse"], layout=c["layout"], kernel=kernel, **kwargs)
        except (ValueError, evosdpa.EvosdpaError) as e:
            if kernel != "auto" and isinstance(e, ValueError):
                continue  # a named kernel that does not take this call ("auto" ran it, first)
            failures.append(f"seed {seed} {kernel}: raised {type(e).__name__}: {e}\n  {c}")
            continue
        out, lse = out if c["lse"] else (out, None)
        try:
            torch.cuda.synchronize()
            check_attention(bhsd(out, c["layout"]), q0, k0, v0, causal=causal, alignment=alignment, scale=c["scale"],
                            lse=lse, rng=rng, what=f"{kernel} {c}", mask=visible, softcap=c["softcap"], bias=bias)
        except AssertionError as e:
            failures.append(f"seed {seed} {kernel}: {e}")
    return failures


def modes():
    """The fuzzers by name, in the order "all" cycles through them: each maps a seed to its failures."""
    import fuzz_backward
    import fuzz_serving
    return {"forward": run_one, "backward": fuzz_backward.run_one, "kvcache": fuzz_serving.run_kvcache,
            "varlen": fuzz_serving.run_varlen}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--what", default="forward", choices=("forward", "backward", "kvcache", "varlen", "all"))
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=None, help="first seed (default: random); calls take seed, seed + 1, ...")
    ap.add_argument("--replay", type=int, default=None, help="run the call of this seed alone")
    a = ap.parse_args()
    fuzzers = modes()
    order = list(fuzzers.values())
    run = (lambda seed: order[seed % len(order)](seed)) if a.what == "all" else fuzzers[a.what]
    seeds = [a.replay] if a.replay is not None else None
    first = a.seed if a.seed is not None else random.SystemRandom().randrange(2**31)
    start, calls, failed = time.time(), 0, []
    n = 0
    while seeds is None and time.time() - start < a.seconds or seeds is not None and n < len(seeds):
        seed = seeds[n] if seeds is not None else first + n
        n += 1
        try:
            failed += run(seed)
        except Exception:  # noqa: BLE001 (a crash of the tool or the library: report it with its seed)
            failed.append(f"seed {seed}: {traceback.format_exc()}")
        calls += 1
    for f in failed:
        print(f, file=sys.stderr)
    print(f"fuzz_attention --what {a.what}: {calls} calls (seeds {first} ..), {len(failed)} failed, "
          f"{time.time() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
