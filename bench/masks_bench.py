"""Sliding windows, softcaps, mask tensors and ALiBi (issue 13): what each costs or saves against the same call
without it, and FlashAttention's flash_attn_func with the same window and softcap where it imports.

    python3 bench/masks_bench.py --json masks.json
    python3 bench/masks_bench.py --dtype bf16 --iters 20
    python3 bench/masks_bench.py --kernel mma_sm80    # one kernel by name (auto by default)
    python3 bench/masks_bench.py --points mask,bias   # the points whose names hold these, with their plain calls

Points (B, H, L, D = 128, Hq = Hkv, fp16 or bf16): causal prefill at L = 32k with a window of 4096 keys
(Mistral's), against full causal (issue 13's target: at least (L / window) / 2 = 4x faster); non-causal
L = 8k with a window of (2048, 2048); a softcap of 50 (Gemma 2) at L = 4k and 8k, causal and not, and
with a window of 4096 (Gemma 2's local layers); mask tensors at L = 4k (issue 13's target: at most 25% over
the plain call): boolean and additive [B, 1, L, L] (transformers' padding masks), additive [1, 1, L, L],
a key padding mask [B, 1, 1, L], and a mask of its own per head [B, H, L, L] (2 GB read per call: the
worst case, not the target's); ALiBi with BLOOM's slopes per head at L = 4k and 8k, causal and not, and with a key padding mask (BLOOM on a padded batch). Each call is timed with CUDA events after warm-up, median
of --iters runs (bench/decode_bench.py's Timer, no L2 flush: these calls read far more than L2 holds), and
reported as time and as TFLOP/s of the dense work (4 B H Lq Lk D, halved with a causal mask, as the fa3 grid
counts it) next to the time ratio against the point's plain call. Every evosdpa result is first checked
against PyTorch's math SDPA with the same mask (float32, on a sample of heads): a maximum absolute error
above 2e-2 marks the point FAIL and the script exits 1 after writing the JSON.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from decode_bench import Timer, first_line, import_evosdpa  # noqa: E402

TOLERANCE = 2e-2
D = 128
# (name, B, H, L, causal, window (left, right) or None, softcap, mask tensor or None: (kind, shape with B,
# H, L for the sizes))
POINTS = [
    ("causal 32k", 1, 16, 32768, True, None, 0.0, None),
    ("causal 32k window 4096", 1, 16, 32768, True, (4095, -1), 0.0, None),
    ("full 8k", 2, 16, 8192, False, None, 0.0, None),
    ("full 8k window 2048+2048", 2, 16, 8192, False, (2048, 2048), 0.0, None),
    ("full 4k", 4, 16, 4096, False, None, 0.0, None),
    ("full 4k softcap 50", 4, 16, 4096, False, None, 50.0, None),
    ("full 4k bool mask [B,1,L,L]", 4, 16, 4096, False, None, 0.0, ("bool", "B1LL")),
    ("full 4k bias [B,1,L,L]", 4, 16, 4096, False, None, 0.0, ("bias", "B1LL")),
    ("full 4k bias [1,1,L,L]", 4, 16, 4096, False, None, 0.0, ("bias", "11LL")),
    ("full 4k key padding [B,1,1,L]", 4, 16, 4096, False, None, 0.0, ("bool", "B11L")),
    ("full 4k bias [B,H,L,L]", 4, 16, 4096, False, None, 0.0, ("bias", "BHLL")),
    ("causal 4k", 4, 16, 4096, True, None, 0.0, None),
    ("causal 4k bias [B,1,L,L]", 4, 16, 4096, True, None, 0.0, ("bias", "B1LL")),
    ("causal 8k", 2, 16, 8192, True, None, 0.0, None),
    ("causal 8k softcap 50", 2, 16, 8192, True, None, 50.0, None),
    ("causal 8k window 4096 softcap 50", 2, 16, 8192, True, (4095, -1), 50.0, None),
    # Mask tensors with a window (Mistral's padded batches; wgmma_sm90 and mma_sm80) and with a softcap too
    # (Gemma 2's local layers on a padded batch: mma_sm80, also on Hopper).
    ("causal 8k window 4096", 2, 16, 8192, True, (4095, -1), 0.0, None),
    ("causal 8k window 4096 key padding [B,1,1,L]", 2, 16, 8192, True, (4095, -1), 0.0, ("bool", "B11L")),
    ("causal 8k window 4096 bias [B,1,L,L]", 2, 16, 8192, True, (4095, -1), 0.0, ("bias", "B1LL")),
    ("causal 8k window 4096 softcap 50 key padding [B,1,1,L]", 2, 16, 8192, True, (4095, -1), 50.0, ("bool", "B11L")),
    ("full 4k alibi", 4, 16, 4096, False, None, 0.0, ("alibi", "H")),
    ("causal 4k alibi", 4, 16, 4096, True, None, 0.0, ("alibi", "H")),
    ("causal 8k alibi", 2, 16, 8192, True, None, 0.0, ("alibi", "H")),
    ("causal 4k alibi key padding [B,1,1,L]", 4, 16, 4096, True, None, 0.0, ("alibi+bool", "B11L")),  # BLOOM, padded
]


def bloom_slopes(torch, h):
    """ALiBi's slopes of BLOOM (Press et al.): 2^(-8 (i + 1) / h) for head i, float32 on the GPU."""
    return torch.exp2(-8.0 * torch.arange(1, h + 1, dtype=torch.float64) / h).float().cuda()


def make_mask_tensor(torch, spec, b, h, length, dtype, gen):
    """A mask of `spec` = (kind, shape letters): a tenth of the keys hidden at random (the first never), bool
    or additive (N(0, 1) biases, -inf where hidden)."""
    kind, letters = spec
    shape = [{"B": b, "H": h, "L": length, "1": 1}[c] for c in letters]
    hidden = torch.rand(shape, generator=gen, device="cuda") < 0.1
    hidden[..., 0] = False
    if kind == "bool":
        return ~hidden
    return torch.randn(shape, generator=gen, device="cuda").to(dtype).masked_fill(hidden, float("-inf"))


def mask_of(torch, lq, lk, causal, window, device):
    i = torch.arange(lq, device=device)[:, None]
    j = torch.arange(lk, device=device)[None, :]
    diag = i + (lk - lq)
    m = torch.ones(lq, lk, dtype=torch.bool, device=device)
    if causal:
        m &= j <= diag
    if window is not None:
        left, right = window
        if left >= 0:
            m &= j >= diag - left
        if right >= 0:
            m &= j <= diag + right
    return m


def check(torch, out, q, k, v, causal, window, softcap, tensor=None, slopes=None):
    """max |O - O_math| over a sample of heads and rows (float32 math on the same inputs)."""
    rows = slice(0, q.shape[2], max(1, q.shape[2] // 512))
    qs, ks, vs = q[:1, :2, rows].float(), k[:1, :2].float(), v[:1, :2].float()
    s = (qs @ ks.transpose(-1, -2)) / D ** 0.5
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    if slopes is not None:  # -slope |i + Lk - Lq - j| (the diagonal bottom-right, as the calls here ask)
        i = torch.arange(q.shape[2], device=q.device)[rows, None]
        j = torch.arange(k.shape[2], device=q.device)[None, :]
        s = s - slopes[:2, None, None] * (i + k.shape[2] - q.shape[2] - j).abs().float()
    if tensor is not None:
        t = tensor.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])[:1, :2, rows]
        s = s.masked_fill(~t, float("-inf")) if t.dtype == torch.bool else s + t.float()
    mask = mask_of(torch, q.shape[2], k.shape[2], causal, window, q.device)[rows]
    s = s.masked_fill(~mask, float("-inf"))
    want = torch.softmax(s, dim=-1).nan_to_num(0.0) @ vs
    return (out[:1, :2, rows].float() - want).abs().max().item()


def flash_attn_peer():
    try:
        from flash_attn import flash_attn_func
        return flash_attn_func
    except Exception:  # noqa: BLE001 -- any import failure means no peer
        return None


def selected_points(fragments):
    """POINTS whose names hold one of the comma-separated fragments (all without any), with the plain call
    of each one's (B, H, L, causal), which its ratio needs."""
    if not fragments:
        return POINTS
    wanted = [p for p in POINTS if any(f in p[0] for f in fragments.split(","))]
    keys = {(p[1], p[2], p[3], p[4]) for p in wanted}
    return [p for p in POINTS if p in wanted or ((p[1], p[2], p[3], p[4]) in keys and p[5] is None and not p[6]
                                                  and p[7] is None)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "bf16", "both"])
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--json", default=None)
    ap.add_argument("--kernel", default=None, help="a kernel by name (default: auto); points it refuses are skipped")
    ap.add_argument("--points", default=None,
                    help="comma-separated name fragments: only the points whose names hold one, and their plain calls")
    args = ap.parse_args()
    points = selected_points(args.points)
    import torch
    evosdpa = import_evosdpa()
    timer = Timer(torch, args.iters, args.warmup, torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    fa = flash_attn_peer()
    dtypes = {"fp16": [torch.float16], "bf16": [torch.bfloat16], "both": [torch.float16, torch.bfloat16]}[args.dtype]
    results, failed = [], False
    print(f"# {torch.cuda.get_device_name()}, evosdpa {evosdpa.__version__}, kernel {args.kernel or 'auto'}, "
          f"flash_attn {'yes' if fa else 'no'}")
    print(f"{'point':34} {'dtype':5} {'us':>10} {'TFLOP/s':>8} {'vs plain':>9} {'max err':>9} {'flash_attn us':>13}")
    for dtype in dtypes:
        plain_us = {}
        for name, b, h, length, causal, window, softcap, spec in points:
            gen = torch.Generator(device="cuda").manual_seed(0)
            q, k, v = (torch.randn(b, h, length, D, generator=gen, device="cuda").to(dtype) for _ in range(3))
            kw = {"causal": causal, "causal_alignment": "bottom_right", "kernel": args.kernel}
            if window is not None:
                kw["window_size"] = window
            if softcap:
                kw["softcap"] = softcap
            # spec kinds: "bool", "bias", "alibi" (slopes, the letters their shape), "alibi+bool" (both)
            kind = spec[0].split("+")[-1] if spec else None
            slopes = bloom_slopes(torch, h) if spec and spec[0].startswith("alibi") else None
            tensor = make_mask_tensor(torch, (kind, spec[1]), b, h, length, dtype, gen) if kind in ("bool", "bias") else None
            if tensor is not None:
                kw["attn_mask"] = tensor
            if slopes is not None:
                kw["alibi_slopes"] = slopes
            row = {"point": name, "dtype": str(dtype).split(".")[-1], "B": b, "H": h, "L": length, "D": D,
                   "causal": causal, "window": window, "softcap": softcap, "mask": list(spec) if spec else None}
            try:
                out = evosdpa.attention(q, k, v, **kw)
                row["max_err"] = check(torch, out, q, k, v, causal, window, softcap, tensor, slopes)
                row["pass"] = row["max_err"] <= TOLERANCE
                failed |= not row["pass"]
                t = timer.time(lambda: evosdpa.attention(q, k, v, **kw), flush=False)
                row["us"] = t["us_median"]
                flops = 4.0 * b * h * length * length * D / (2 if causal else 1)
                row["tflops"] = flops / row["us"] / 1e6
                key = (b, h, length, causal)
                if window is None and not softcap and spec is None:
                    plain_us[key] = row["us"]
                row["vs_plain"] = row["us"] / plain_us[key] if key in plain_us else None
            except Exception as e:  # noqa: BLE001 -- recorded per point
                row["error"] = first_line(e)
                # A kernel asked for by name may refuse a point (NOT_SUPPORTED): skipped, not failed.
                failed |= not (args.kernel and "not supported" in row["error"])
            if fa is not None and "error" not in row and tensor is None and not args.kernel:
                qf, kf, vf = (t.transpose(1, 2) for t in (q, k, v))
                fkw = {"causal": causal, "window_size": window or (-1, -1), "softcap": softcap, "alibi_slopes": slopes}
                try:
                    row["flash_attn_us"] = timer.time(lambda: fa(qf, kf, vf, **fkw), flush=False)["us_median"]
                except Exception as e:  # noqa: BLE001
                    row["flash_attn_error"] = first_line(e)
            results.append(row)
            vs = f"{row['vs_plain']:.3f}x" if row.get("vs_plain") else "-"
            if "error" in row:
                print(f"{name:34} {row['dtype']:5} ERROR {row['error']}")
            else:
                fa_us = f"{row['flash_attn_us']:.0f}" if "flash_attn_us" in row else "-"
                print(f"{name:34} {row['dtype']:5} {row['us']:10.1f} {row['tflops']:8.1f} {vs:>9} "
                      f"{row['max_err']:9.2e}{'' if row['pass'] else ' FAIL'} {fa_us:>13}")
            del q, k, v, tensor, slopes
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "results": results}, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
