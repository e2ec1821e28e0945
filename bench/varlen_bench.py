"""Packed sequences (C ABI 0.6): evosdpa.attention_varlen's forward beside the dense one, in TFLOP/s.

    python3 bench/varlen_bench.py --json varlen.json
    python3 bench/varlen_bench.py --dtype fp16 --head-dim 128 --lengths 1024 8192 --iters 20 --out varlen-quick.json

The same tokens go through evosdpa.attention as a batch of equal sequences and through attention_varlen
packed, on one GPU in one process. Points: --total tokens (16384) in sequences of L in {512, 1024, 2048, 4096, 8192} (B = total / L), H = 16
query and K/V heads, D 64 and 128, fp16 and bf16, causal or not. For each:
  dense    evosdpa.attention on [B, L, H, D] (layout "bshd");
  equal    evosdpa.attention_varlen on the same memory seen as [B * L, H, D] with cu_seqlens 0, L, 2L, ...:
           the same work, so it should run within 5% of dense (EQUAL_TARGET);
  mixed    attention_varlen on B sequences of lengths drawn from a fixed seed between L/4 and 7L/4 and
           scaled to sum to the same total (the last one absorbs the rounding; max_seqlen the longest).
Causal is bottom-right within each sequence, which with equal query and key lengths is the usual mask.
FLOPs = 4 * D * H * (the (query, key) pairs a sequence computes), summed over the sequences: n^2 per sequence
of n tokens, n (n + 1) / 2 causal (exact). TFLOP/s = FLOPs / the median time; each varlen row's ratio is its
TFLOP/s over dense's at the same point (for mixed the work differs: it has the same tokens, more pairs).
No peer is timed (cuDNN's and FlashAttention's varlen forwards are not at hand): evosdpa's dense forward is
the yardstick.

Timing as decode_bench.py does it (its Timer): CUDA events around each call after --warmup calls, the median
of --iters runs, each preceded by a GPU-side spin (torch.cuda._sleep) long enough for the host to enqueue the
call, so that a time is the GPU's and not the Python wrapper's. No L2 flush: a prefill of 16k tokens is
compute-bound, and its tensors (32 to 64 MB each) do not stay in L2 between calls anyway.

Every output is checked once per point, before timing, against PyTorch's math backend in float32, sequence
by sequence (all of them: a prefill's reference costs less than a second): a maximum absolute error above
TOLERANCE marks the point FAIL, and the script exits 1 after writing the JSON.
"""
import argparse
import json
import random
import statistics
import sys

from decode_bench import Timer, first_line, import_evosdpa, run_info

TOTAL_TOKENS = 16384
LENGTHS = [512, 1024, 2048, 4096, 8192]
HEADS = 16
TOLERANCE = 2e-2
EQUAL_TARGET = 0.95  # equal-work varlen at >= 95% of the dense forward's TFLOP/s
MIXED_SEED = 20260
REFERENCE_HEADS = 4  # heads per float32 reference call (its scores are [4, n, n] floats)


def mixed_lengths(b, length, total, seed):
    """B lengths drawn uniformly from [L/4, 7L/4] with a fixed seed, scaled to sum to `total`, each >= 1."""
    rnd = random.Random(seed * 1000003 + length)
    draws = [rnd.uniform(length / 4, 7 * length / 4) for _ in range(b)]
    scale = total / sum(draws)
    lengths = [max(1, round(x * scale)) for x in draws[:-1]]
    lengths.append(total - sum(lengths))
    if lengths[-1] < 1:
        raise ValueError(f"could not draw {b} lengths summing to {total}")
    return lengths


def pairs(lengths, causal):
    return sum(n * (n + 1) // 2 if causal else n * n for n in lengths)


def offsets(lengths):
    """[0, n0, n0 + n1, ...]: the cumulative lengths (cu_seqlens) of `lengths`."""
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return cu


def reference_error(torch, F, sdpa_kernel, backend_math, out, q, k, v, cu, causal):
    """Max |out - reference| over every sequence of the packed tensors [total, H, D] (offsets cu): float32
    attention by PyTorch's math backend, REFERENCE_HEADS heads at a time."""
    err = 0.0
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for s, e in zip(cu[:-1], cu[1:]):
            for h in range(0, HEADS, REFERENCE_HEADS):
                qb, kb, vb = (t[s:e, h:h + REFERENCE_HEADS].float().transpose(0, 1)[None] for t in (q, k, v))
                with sdpa_kernel([backend_math]):
                    ref = F.scaled_dot_product_attention(qb, kb, vb, is_causal=causal)[0]  # [h, n, D]
                got = out[s:e, h:h + REFERENCE_HEADS].float().transpose(0, 1)
                err = max(err, (got - ref).abs().max().item())
                del qb, kb, vb, ref, got
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev_tf32
    return err


def run_point(env, dtype_name, dtype, d, causal, length, args):
    torch, F, evosdpa, timer = env["torch"], env["F"], env["evosdpa"], env["timer"]
    sdpa_kernel, backend_math = env["sdpa_kernel"], env["backend_math"]
    total = args.total
    b = total // length
    row = {"dtype": dtype_name, "head_dim": d, "heads": HEADS, "causal": causal, "seqlen": length, "batch": b,
           "total_tokens": total, "status": "ok"}
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1000003 * length + 7 * d + int(causal))
    q, k, v = (torch.randn(total, HEADS, d, dtype=dtype, device="cuda", generator=gen) for _ in range(3))
    flop_per_pair = 4 * d * HEADS
    equal = [length] * b
    mixed = mixed_lengths(b, length, total, MIXED_SEED)
    row["mixed_lengths"] = mixed
    cu_equal, cu_mixed = (torch.tensor(offsets(n), dtype=torch.int32, device="cuda") for n in (equal, mixed))
    dense_shape = (b, length, HEADS, d)

    calls = {
        "dense": (lambda: evosdpa.attention(q.view(dense_shape), k.view(dense_shape), v.view(dense_shape),
                                            causal=causal, layout="bshd", kernel=args.kernel).view(total, HEADS, d),
                  equal),
        "equal": (lambda: evosdpa.attention_varlen(q, k, v, cu_equal, cu_equal, length, length, causal=causal,
                                                   kernel=args.kernel), equal),
        "mixed": (lambda: evosdpa.attention_varlen(q, k, v, cu_mixed, cu_mixed, max(mixed), max(mixed),
                                                   causal=causal, kernel=args.kernel), mixed),
    }
    failed = False
    with torch.inference_mode():
        for name, (call, lengths) in calls.items():
            entry = {"pairs": pairs(lengths, causal)}
            entry["flop"] = flop_per_pair * entry["pairs"]
            try:
                out = call()
                torch.cuda.synchronize()
                entry["max_abs_err"] = reference_error(torch, F, sdpa_kernel, backend_math, out, q, k, v,
                                                       offsets(lengths), causal)
                entry["verify"] = "PASS" if entry["max_abs_err"] <= TOLERANCE else "FAIL"
                failed |= entry["verify"] == "FAIL"
                del out
                entry.update(timer.time(call, flush=False))
                entry["tflops"] = entry["flop"] / (entry["us_median"] * 1e-6) / 1e12
                entry["ok"] = True
            except Exception as e:  # evosdpa refusing the point is a result, not the end of the run
                entry.update({"ok": False, "error": first_line(e), "verify": "ERROR"})
                failed = True
                torch.cuda.empty_cache()
            row[name] = entry
    if row["dense"].get("ok"):
        for name in ("equal", "mixed"):
            if row[name].get("ok"):
                row[name]["ratio_to_dense"] = row[name]["tflops"] / row["dense"]["tflops"]
        if row["equal"].get("ok"):
            row["equal"]["meets_target"] = row["equal"]["ratio_to_dense"] >= EQUAL_TARGET
    if failed:
        row["status"] = "FAIL"
    return row


def fmt(x, spec):
    return format(x, spec) if x is not None else "-"


def print_header():
    print(f"{'dtype':5s} {'D':>3s} {'causal':6s} {'L':>5s} {'B':>3s} | {'dense µs':>9s} {'TFLOP/s':>7s} | "
          f"{'equal µs':>9s} {'TFLOP/s':>7s} {'ratio':>5s} | {'mixed µs':>9s} {'TFLOP/s':>7s} {'ratio':>5s} | "
          f"{'max err':>8s} verify")


def print_row(r):
    head = f"{r['dtype']:5s} {r['head_dim']:3d} {str(r['causal']):6s} {r['seqlen']:5d} {r['batch']:3d} | "

    def part(e, ratio):
        if not e.get("ok"):
            return f"{'error':>9s} {'-':>7s}" + (f" {'-':>5s}" if ratio else "")
        text = f"{e['us_median']:9.1f} {e['tflops']:7.1f}"
        return text + (f" {fmt(e.get('ratio_to_dense'), '5.3f'):>5s}" if ratio else "")

    errs = [r[n]["max_abs_err"] for n in ("dense", "equal", "mixed") if "max_abs_err" in r[n]]
    verdicts = "/".join(r[n]["verify"] for n in ("dense", "equal", "mixed"))
    print(head + part(r["dense"], False) + " | " + part(r["equal"], True) + " | " + part(r["mixed"], True) + " | " +
          f"{fmt(max(errs) if errs else None, '8.1e'):>8s} {verdicts}")
    for n in ("dense", "equal", "mixed"):
        if not r[n].get("ok"):
            print(f"    {n}: {r[n]['error']}", file=sys.stderr)


def summary(rows):
    """Per dtype: equal-work points within EQUAL_TARGET of dense, the ratios' range, verification failures."""
    out = {}
    for dt in sorted({r["dtype"] for r in rows}):
        ran = [r for r in rows if r["dtype"] == dt]
        equal = [r["equal"]["ratio_to_dense"] for r in ran if "ratio_to_dense" in r["equal"]]
        mixed = [r["mixed"]["ratio_to_dense"] for r in ran if "ratio_to_dense" in r["mixed"]]
        out[dt] = {
            "equal_meets_target": sum(1 for r in ran if r["equal"].get("meets_target")),
            "equal_points": len(equal),
            "equal_ratio_min": min(equal) if equal else None,
            "equal_ratio_median": statistics.median(equal) if equal else None,
            "mixed_ratio_min": min(mixed) if mixed else None,
            "mixed_ratio_median": statistics.median(mixed) if mixed else None,
            "verify_fail": sum(1 for r in ran if r["status"] == "FAIL"),
        }
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtype", default="both", choices=["fp16", "bf16", "both"])
    ap.add_argument("--head-dim", default="both", choices=["64", "128", "both"])
    ap.add_argument("--causal", default="both", choices=["yes", "no", "both"])
    ap.add_argument("--lengths", type=int, nargs="+", default=LENGTHS, help=f"sequence lengths L (default {LENGTHS})")
    ap.add_argument("--total", type=int, default=TOTAL_TOKENS, help=f"tokens per point (default {TOTAL_TOKENS})")
    ap.add_argument("--iters", type=int, default=30, help="timed runs per measurement (median; default 30)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--kernel", default=None, help="evosdpa's kernel= for every call (default None: auto)")
    ap.add_argument("--json", "--out", dest="json", default=None, help="write every result here")
    args = ap.parse_args()
    if args.iters < 1 or args.warmup < 0:
        ap.error("--iters must be >= 1 and --warmup >= 0")
    if any(n < 4 or args.total % n for n in args.lengths):
        ap.error(f"every length must be >= 4 and divide --total ({args.total})")

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if not torch.cuda.is_available():
        raise SystemExit("varlen_bench.py needs a CUDA GPU")
    evosdpa = import_evosdpa()
    evosdpa.attention_varlen  # noqa: B018 -- an evosdpa without it fails here, not mid-grid

    dtypes = {"fp16": [("fp16", torch.float16)], "bf16": [("bf16", torch.bfloat16)],
              "both": [("fp16", torch.float16), ("bf16", torch.bfloat16)]}[args.dtype]
    head_dims = [64, 128] if args.head_dim == "both" else [int(args.head_dim)]
    causals = {"yes": [True], "no": [False], "both": [False, True]}[args.causal]
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    # The Timer's L2 flush is not used (flush=False): a token scratch buffer stands in for its 256 MiB one.
    timer = Timer(torch, args.iters, args.warmup, torch.empty(4, dtype=torch.uint8, device="cuda"))
    if timer.cycles_per_us is None:
        print("torch.cuda._sleep is missing: timings include the host's launch overhead", file=sys.stderr)
    print(f"{props.name}, torch {torch.__version__}, evosdpa {evosdpa.__version__} "
          f"(library {evosdpa.library_version()} at {evosdpa.library_path()}), kernel {args.kernel or 'auto'}")
    print(f"{args.total} tokens per point, H {HEADS}, mixed lengths in [L/4, 7L/4] (seed {MIXED_SEED}), median of "
          f"{args.iters} runs; ratio = varlen TFLOP/s / dense TFLOP/s (equal work: target >= {EQUAL_TARGET:.0%})")
    print_header()

    env = {"torch": torch, "F": F, "evosdpa": evosdpa, "timer": timer, "sdpa_kernel": sdpa_kernel,
           "backend_math": SDPBackend.MATH}
    rows = []
    for dtype_name, dtype in dtypes:
        for d in head_dims:
            for causal in causals:
                for length in args.lengths:
                    row = run_point(env, dtype_name, dtype, d, causal, length, args)
                    rows.append(row)
                    print_row(row)
                    sys.stdout.flush()

    crit = summary(rows)
    for dt, s in crit.items():
        print(f"{dt}: equal-work varlen within {1 - EQUAL_TARGET:.0%} of dense: {s['equal_meets_target']}/"
              f"{s['equal_points']} (ratio min {fmt(s['equal_ratio_min'], '.3f')}, median "
              f"{fmt(s['equal_ratio_median'], '.3f')}); mixed lengths: ratio min {fmt(s['mixed_ratio_min'], '.3f')}, "
              f"median {fmt(s['mixed_ratio_median'], '.3f')}; verification failures: {s['verify_fail']}")
    if args.json:
        report = {
            **run_info(torch, evosdpa, props, args.kernel),
            "total_tokens": args.total, "heads": HEADS, "lengths": args.lengths, "mixed_seed": MIXED_SEED,
            "iters": args.iters, "warmup": args.warmup, "tolerance": TOLERANCE, "equal_target": EQUAL_TARGET,
            "flops": "4 * D * H * visible (query, key) pairs: n^2 per sequence, n (n + 1) / 2 causal",
            "timing": ("CUDA events around each call, a GPU-side spin before it hiding host launch overhead, no L2 "
                       "flush" if timer.cycles_per_us else
                       "CUDA events around each call, no L2 flush (no torch.cuda._sleep: host launch overhead "
                       "included)"),
            "criteria": crit, "results": rows,
        }
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        print(f"wrote {args.json}")
    if any(r["status"] == "FAIL" for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
