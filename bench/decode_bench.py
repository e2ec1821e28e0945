"""Decode against a KV cache (issue 12): evosdpa.attention_with_kvcache, dense and paged, beside PyTorch's
SDPA backends (and flash_attn.flash_attn_with_kvcache when it imports), as bandwidth against the device's
own copy bandwidth measured in the same process.

    python3 bench/decode_bench.py --grid full --dtype both --json decode.json
    python3 bench/decode_bench.py --grid quick --dtype fp16 --iters 30 --json decode-quick.json

Shapes: one new token per sequence (Lq = 1), Hq/Hkv = 32/8, D = 128, B in {1, 8, 64}, caches of 1k to 128k
keys, every sequence full (cache_seqlens = L). evosdpa reads the cache dense [B, L, Hkv, D] and paged
[num_pages, page_size, Hkv, D] through a block table of randomly shuffled pages; the paged cache is a view
of the dense one's memory (B * L / page_size pages) so that the largest points fit, and its sequences
therefore hold other keys than the dense ones (its reference is gathered through the block table).
The PyTorch peers take the dense cache's data as q [B, Hq, 1, D] and k, v [B, Hkv, L, D] (transposed
views, enable_gqa=True; K/V heads expanded before timing where the torch version lacks it), one backend
at a time under torch.nn.attention.sdpa_kernel; a backend that raises (no kernel for the shape, out of
memory) is recorded with its reason.

Bandwidth = the K and V bytes a call must read (2 * B * L * Hkv * D * element size) / its median time;
the copy bandwidth = 2 * 1 GiB / the median time of dst.copy_(src) (read and write). Timing, as
torch_peers.py does it (CUDA events around each call after warm-up, median of --iters runs), with two
differences a decode step needs: L2 (50 MB on an H100) is flushed before every timed call by writing a
256 MiB scratch buffer and then reading it back (the read leaves L2 holding clean lines: after the writes
alone, up to 50 MB of dirty lines would be written back to DRAM inside the timed call, a cost of the same
order as a small cache's reads; the start event is recorded after the flush), and each iteration begins with a
GPU-side spin (torch.cuda._sleep) long enough for the host to enqueue the flush and the call behind it, so
that a call's time is its GPU time and not the host's launch overhead (the Python argument checks of
evosdpa's and PyTorch's wrappers), like the CUDA-graph tables of record.

evosdpa's output is checked once per point, before timing, against PyTorch's math backend in float32,
sequence by sequence (all sequences of small points, the first, middle and last of large ones): a
maximum absolute error above 2e-2 marks the point FAIL, and the script exits 1 after writing the JSON.
A point whose tensors would not fit in free GPU memory with a margin is recorded as skipped.
"""
import argparse
import json
import os
import statistics
import sys
import time
import warnings

HEADS_Q, HEADS_KV, HEAD_DIM, SEQLEN_Q = 32, 8, 128, 1
GRIDS = {"full": ([1, 8, 64], [1024 << i for i in range(8)]),  # 1k .. 128k
         "quick": ([1, 8], [8192, 131072])}
COPY_BYTES = 1 << 30
FLUSH_BYTES = 256 << 20
TOLERANCE = 2e-2
SDPA_BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")
SDPA_NAMES = {"FLASH_ATTENTION": "flash", "EFFICIENT_ATTENTION": "efficient", "CUDNN_ATTENTION": "cudnn",
              "MATH": "math"}
BW_TARGET = 0.80       # issue 12: >= 80% of the copy bandwidth ...
BW_TARGET_FROM = 8192  # ... for caches of 8k keys and more
GIB = 1 << 30


def import_evosdpa():
    """evosdpa as installed, else the package in this repository's python/ (with EVOSDPA_LIBRARY pointing at
    a build's libevosdpa.so, as scripts/benchmarks.sh sets it)."""
    try:
        import evosdpa
    except ImportError:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
        import evosdpa
    evosdpa.attention_with_kvcache  # noqa: B018 -- the torch functions load lazily: fail here, not mid-grid
    return evosdpa


def short_length(n):
    return f"{n // 1024}k" if n % 1024 == 0 else str(n)


def first_line(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200] if text else ''}"


class Timer:
    """CUDA-event timing of one call at a time: optional L2 flush, then start event, call, end event."""

    def __init__(self, torch, iters, warmup, scratch):
        self.torch, self.iters, self.warmup, self.scratch = torch, iters, warmup, scratch
        self.scratch_words = scratch.view(torch.float32)
        self.cycles_per_us = self._calibrate_sleep()

    def flush(self):
        """Evict L2: write the scratch buffer, then read it (so that what L2 holds afterwards is clean)."""
        self.scratch.zero_()
        self.scratch_words.sum()

    def _calibrate_sleep(self):
        """GPU clock cycles per microsecond of torch.cuda._sleep (None where this torch has no _sleep)."""
        torch = self.torch
        if not hasattr(torch.cuda, "_sleep"):
            return None
        torch.cuda._sleep(1000)
        torch.cuda.synchronize()
        cycles, runs = 10_000_000, []
        for _ in range(3):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.cuda._sleep(cycles)
            end.record()
            end.synchronize()
            runs.append(start.elapsed_time(end) * 1000.0)
        return cycles / statistics.median(runs)

    def time(self, fn, flush=True):
        """{"us_median", "us_min", "us_max", "runs", "host_us", "spin_us"} of fn()."""
        torch = self.torch

        def step():
            if flush:
                self.flush()
            fn()

        for _ in range(self.warmup):
            step()
        torch.cuda.synchronize()
        # The host's time to enqueue one flush and call (no synchronisation in between), which the GPU-side
        # spin before each timed iteration must exceed.
        t0 = time.perf_counter()
        for _ in range(3):
            step()
        host_us = (time.perf_counter() - t0) / 3 * 1e6
        torch.cuda.synchronize()
        spin_us = min(2.0 * host_us + 50.0, 20000.0) if self.cycles_per_us else 0.0
        spin_cycles = int(spin_us * self.cycles_per_us) if self.cycles_per_us else 0
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(self.iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(self.iters)]
        for start, end in zip(starts, ends):
            if spin_cycles:
                torch.cuda._sleep(spin_cycles)
            if flush:
                self.flush()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends)]
        return {"us_median": statistics.median(times), "us_min": min(times), "us_max": max(times),
                "runs": len(times), "host_us": round(host_us, 1), "spin_us": round(spin_us, 1)}


def copy_bandwidth(torch, timer):
    """Device-to-device copy of 1 GiB: 2 * bytes (read and write) / median time, GB/s (1e9 bytes)."""
    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda").random_(0, 256)
    dst = torch.empty_like(src)
    t = timer.time(lambda: dst.copy_(src), flush=False)  # 1 GiB is far beyond L2: no flush needed
    del src, dst
    torch.cuda.empty_cache()
    t["bytes"] = COPY_BYTES
    t["gb_per_s"] = 2 * COPY_BYTES / (t["us_median"] * 1e-6) / 1e9
    return t


def sdpa_gqa_mode(torch, F):
    """"enable_gqa" where scaled_dot_product_attention takes it, else "repeat_interleave"."""
    q = torch.zeros(1, 4, 1, 64, dtype=torch.float16, device="cuda")
    k = torch.zeros(1, 2, 16, 64, dtype=torch.float16, device="cuda")
    try:
        F.scaled_dot_product_attention(q, k, k, enable_gqa=True)
        return "enable_gqa"
    except TypeError:
        return "repeat_interleave"


def flash_attn_module():
    """(flash_attn_with_kvcache or None, {"available", "version" or "error"})."""
    try:
        import flash_attn
        from flash_attn import flash_attn_with_kvcache
    except Exception as e:  # ImportError, or an extension built for another torch
        return None, {"available": False, "error": first_line(e)}
    return flash_attn_with_kvcache, {"available": True, "version": getattr(flash_attn, "__version__", "?")}


def reference_error(torch, F, sdpa_kernel, backend_math, out, q, sequence_kv, seqs):
    """Max |out - reference| over the sequences `seqs`: float32 attention by PyTorch's math backend, the
    Hq/Hkv query heads of each K/V head taken as that head's query rows (exact for one non-causal token)."""
    group = HEADS_Q // HEADS_KV
    err = 0.0
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for b in seqs:
            k, v = sequence_kv(b)  # [L, Hkv, D] each
            qb = q[b, 0].float().reshape(HEADS_KV, group, HEAD_DIM)[None]   # [1, Hkv, G, D]
            kb = k.float().transpose(0, 1)[None]                             # [1, Hkv, L, D]
            vb = v.float().transpose(0, 1)[None]
            with sdpa_kernel([backend_math]):
                ref = F.scaled_dot_product_attention(qb, kb, vb)             # [1, Hkv, G, D]
            got = out[b, 0].float().reshape(HEADS_KV, group, HEAD_DIM)
            err = max(err, (got - ref[0]).abs().max().item())
            del k, v, kb, vb, ref
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev_tf32
    return err


def bandwidth(t, kv_bytes, copy_gbs):
    t["gb_per_s"] = kv_bytes / (t["us_median"] * 1e-6) / 1e9
    t["pct_copy"] = 100.0 * t["gb_per_s"] / copy_gbs
    return t


def run_point(env, dtype_name, dtype, b, length, args, copy_gbs):
    torch, F, evosdpa = env["torch"], env["F"], env["evosdpa"]
    sdpa_kernel, SDPBackend, timer = env["sdpa_kernel"], env["SDPBackend"], env["timer"]
    es = torch.empty((), dtype=dtype).element_size()
    kv_bytes = 2 * b * length * HEADS_KV * HEAD_DIM * es
    row = {"dtype": dtype_name, "batch": b, "seqlen_k": length, "seqlen_q": SEQLEN_Q, "heads_q": HEADS_Q,
           "heads_kv": HEADS_KV, "head_dim": HEAD_DIM, "page_size": args.page_size, "kv_bytes": kv_bytes}
    group = HEADS_Q // HEADS_KV
    # What the point holds at once: the cache (the paged one is a view of it), and the float32 copies of
    # one sequence's K and V (plus a gathered paged sequence) while verifying.
    seq_bytes = length * HEADS_KV * HEAD_DIM
    need = kv_bytes + 2 * seq_bytes * (4 + es) + (64 << 20)
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    margin = max(2 * GIB, total // 20)
    if need + margin > free:
        row["status"] = "skipped"
        row["reason"] = (f"needs {need / 1e9:.1f} GB + {margin / 1e9:.1f} GB margin, "
                         f"{free / 1e9:.1f} GB free")
        return row

    gen = torch.Generator(device="cuda")
    gen.manual_seed(1000003 * b + length)
    q = torch.randn(b, SEQLEN_Q, HEADS_Q, HEAD_DIM, dtype=dtype, device="cuda", generator=gen)
    k = torch.randn(b, length, HEADS_KV, HEAD_DIM, dtype=dtype, device="cuda", generator=gen)
    v = torch.randn(b, length, HEADS_KV, HEAD_DIM, dtype=dtype, device="cuda", generator=gen)
    lens = torch.full((b,), length, dtype=torch.int32, device="cuda")
    pages_per_seq = length // args.page_size
    num_pages = b * pages_per_seq
    k_pages = k.view(num_pages, args.page_size, HEADS_KV, HEAD_DIM)
    v_pages = v.view(num_pages, args.page_size, HEADS_KV, HEAD_DIM)
    cpu_gen = torch.Generator()
    cpu_gen.manual_seed(length * 131 + b)
    table = torch.randperm(num_pages, generator=cpu_gen).to(torch.int32).view(b, pages_per_seq).cuda()

    def dense_call():
        return evosdpa.attention_with_kvcache(q, k, v, cache_seqlens=lens, kernel=args.kernel)

    def paged_call():
        return evosdpa.attention_with_kvcache(q, k_pages, v_pages, cache_seqlens=lens, block_table=table,
                                              kernel=args.kernel)

    def dense_kv(i):
        return k[i], v[i]

    def paged_kv(i):
        idx = table[i].long()
        return (k_pages[idx].reshape(length, HEADS_KV, HEAD_DIM),
                v_pages[idx].reshape(length, HEADS_KV, HEAD_DIM))

    seqs = list(range(b)) if b * length <= (1 << 21) else sorted({0, b // 2, b - 1})
    row["verified_sequences"] = seqs
    row["status"] = "ok"
    failed = False
    with torch.inference_mode():
        for name, call, kv in (("dense", dense_call, dense_kv), ("paged", paged_call, paged_kv)):
            entry = {}
            try:
                out = call()
                torch.cuda.synchronize()
                err = reference_error(torch, F, sdpa_kernel, SDPBackend.MATH, out, q, kv, seqs)
                del out
                entry["max_abs_err"] = err
                entry["verify"] = "PASS" if err <= TOLERANCE else "FAIL"
                failed |= entry["verify"] == "FAIL"
                entry.update(bandwidth(timer.time(call), kv_bytes, copy_gbs))
                entry["ok"] = True
            except Exception as e:  # evosdpa refusing the point is a result, not the end of the run
                entry = {"ok": False, "error": first_line(e), "verify": "ERROR"}
                failed = True
                torch.cuda.empty_cache()
            row[name] = entry

        # PyTorch SDPA on the dense cache's data: [B, H, L, D] views.
        qs = q.transpose(1, 2)
        ks, vs = k.transpose(1, 2), v.transpose(1, 2)
        kwargs = {}
        sdpa = {}
        if env["gqa"] == "enable_gqa":
            kwargs["enable_gqa"] = True
        else:
            extra = kv_bytes * (group - 1)  # K and V, each Hq/Hkv times as large
            if extra + margin > torch.cuda.mem_get_info()[0]:
                ks = vs = None
                why = f"K/V heads expanded for SDPA would need {extra / 1e9:.1f} GB more"
                for name in SDPA_BACKENDS:
                    sdpa[SDPA_NAMES[name]] = {"ok": False, "error": why}
            else:  # expanded once, before timing: SDPA then reads Hq/Hkv times the bytes
                ks = ks.repeat_interleave(group, dim=1)
                vs = vs.repeat_interleave(group, dim=1)
        if ks is not None:
            for name in SDPA_BACKENDS:
                backend = getattr(SDPBackend, name, None)
                key = SDPA_NAMES[name]
                if backend is None:
                    sdpa[key] = {"ok": False, "error": "not in this torch's SDPBackend"}
                    continue

                def sdpa_call(backend=backend):
                    with sdpa_kernel([backend]):
                        return F.scaled_dot_product_attention(qs, ks, vs, **kwargs)

                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    try:
                        sdpa_call()
                        torch.cuda.synchronize()
                        sdpa[key] = bandwidth(timer.time(sdpa_call), kv_bytes, copy_gbs)
                        sdpa[key]["ok"] = True
                    except Exception as e:  # no kernel for this shape, out of memory: unsupported here
                        why = first_line(e)
                        reasons = [str(w.message).strip().splitlines()[0][:200] for w in caught]
                        if reasons:
                            why += " (" + "; ".join(reasons[:3]) + ")"
                        sdpa[key] = {"ok": False, "error": why}
                        torch.cuda.empty_cache()
        row["sdpa"] = sdpa
        ran = {n: s for n, s in sdpa.items() if s.get("ok")}
        if ran:
            best = min(ran, key=lambda n: ran[n]["us_median"])
            row["sdpa_best"] = {"backend": best, "us_median": ran[best]["us_median"]}
            if row["dense"].get("ok"):
                row["speedup_vs_sdpa"] = ran[best]["us_median"] / row["dense"]["us_median"]
        del qs, ks, vs

        fa = env["flash_attn"]
        if fa is not None:
            fa_rows = {}
            calls = {"dense": lambda: fa(q, k, v, cache_seqlens=lens)}
            if args.page_size % 256 == 0:  # FlashAttention-2's paged cache takes pages of 256 keys and more
                calls["paged"] = lambda: fa(q, k_pages, v_pages, cache_seqlens=lens, block_table=table)
            for name, call in calls.items():
                try:
                    call()
                    torch.cuda.synchronize()
                    fa_rows[name] = bandwidth(timer.time(call), kv_bytes, copy_gbs)
                    fa_rows[name]["ok"] = True
                except Exception as e:
                    fa_rows[name] = {"ok": False, "error": first_line(e)}
            row["flash_attn"] = fa_rows

    if length >= BW_TARGET_FROM:
        for name in ("dense", "paged"):
            if row[name].get("ok"):
                row[name]["meets_bandwidth"] = row[name]["pct_copy"] >= 100 * BW_TARGET
    if failed:
        row["status"] = "FAIL"
    del q, k, v, k_pages, v_pages, table, lens
    torch.cuda.empty_cache()
    return row


def fmt(x, spec):
    return format(x, spec) if x is not None else "-"


def print_header():
    print(f"{'dtype':5s} {'B':>3s} {'cache':>5s} | {'dense µs':>9s} {'GB/s':>6s} {'%copy':>5s} | "
          f"{'paged µs':>9s} {'GB/s':>6s} {'%copy':>5s} | {'best SDPA':>9s} {'µs':>9s} {'speedup':>7s} | "
          f"{'FA2 kv µs':>9s} | {'max err':>8s} verify")


def print_row(r):
    head = f"{r['dtype']:5s} {r['batch']:3d} {short_length(r['seqlen_k']):>5s} | "
    if r["status"] == "skipped":
        print(head + "skipped: " + r["reason"])
        return

    def part(e):
        if not e.get("ok"):
            return f"{'error':>9s} {'-':>6s} {'-':>5s}"
        return f"{e['us_median']:9.1f} {e['gb_per_s']:6.0f} {e['pct_copy']:5.1f}"

    best = r.get("sdpa_best")
    fa = (r.get("flash_attn") or {}).get("dense") or {}
    errs = [r[n]["max_abs_err"] for n in ("dense", "paged") if "max_abs_err" in r[n]]
    verdicts = "/".join(r[n]["verify"] for n in ("dense", "paged"))
    print(head + part(r["dense"]) + " | " + part(r["paged"]) + " | " +
          f"{best['backend'] if best else '-':>9s} {fmt(best and best['us_median'], '9.1f'):>9s} "
          f"{fmt(r.get('speedup_vs_sdpa'), '6.2f') + ('x' if r.get('speedup_vs_sdpa') else ''):>7s} | "
          f"{fmt(fa.get('us_median'), '9.1f'):>9s} | {fmt(max(errs) if errs else None, '8.1e'):>8s} {verdicts}")
    for n in ("dense", "paged"):
        if not r[n].get("ok"):
            print(f"    evosdpa {n}: {r[n]['error']}", file=sys.stderr)


def summary(rows):
    """Issue 12's criteria per dtype: bandwidth >= 80% of copy for caches >= 8k, faster than the best SDPA."""
    out = {}
    for dt in sorted({r["dtype"] for r in rows}):
        ran = [r for r in rows if r["dtype"] == dt and r["status"] != "skipped"]
        s = {}
        for n in ("dense", "paged"):
            big = [r for r in ran if r["seqlen_k"] >= BW_TARGET_FROM]
            s[f"{n}_bandwidth_met"] = sum(1 for r in big if r[n].get("meets_bandwidth"))
            s[f"{n}_bandwidth_points"] = len(big)
        cmp = [r for r in ran if "speedup_vs_sdpa" in r]
        s["faster_than_sdpa"] = sum(1 for r in cmp if r["speedup_vs_sdpa"] > 1.0)
        s["sdpa_points"] = len(cmp)
        s["verify_fail"] = sum(1 for r in ran if r["status"] == "FAIL")
        out[dt] = s
    return out



def run_info(torch, evosdpa, props, kernel):
    """The GPU, PyTorch and evosdpa a benchmark ran on, for its JSON report (varlen_bench.py's too)."""
    return {"gpu": props.name, "compute_capability": f"{props.major}.{props.minor}",
            "sm_count": props.multi_processor_count, "memory_bytes": props.total_memory,
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "evosdpa": evosdpa.__version__, "library_version": evosdpa.library_version(),
            "library_path": evosdpa.library_path(), "kernel": kernel or "auto"}

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grid", default="full", choices=list(GRIDS))
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "bf16", "both"])
    ap.add_argument("--iters", type=int, default=50, help="timed runs per measurement (median; default 50)")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--page-size", type=int, default=16, help="keys per page of the paged cache (default 16)")
    ap.add_argument("--kernel", default=None, help="evosdpa's kernel= (default None: auto)")
    ap.add_argument("--batches", default=None, help="comma-separated batch sizes instead of the grid's")
    ap.add_argument("--caches", default=None, help="comma-separated cache lengths (keys) instead of the grid's")
    ap.add_argument("--json", default=None, help="write every result here")
    args = ap.parse_args()
    batches, lengths = GRIDS[args.grid]
    try:
        if args.batches:
            batches = [int(x) for x in args.batches.split(",")]
        if args.caches:
            lengths = [int(x) for x in args.caches.split(",")]
    except ValueError:
        ap.error("--batches and --caches take comma-separated integers")
    if any(x <= 0 for x in batches + lengths):
        ap.error("--batches and --caches must be positive")
    if args.iters < 1 or args.warmup < 0:
        ap.error("--iters must be >= 1 and --warmup >= 0")
    if args.page_size <= 0 or args.page_size % 16 or any(n % args.page_size for n in lengths):
        ap.error(f"--page-size must be a positive multiple of 16 dividing every cache length ({lengths})")

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if not torch.cuda.is_available():
        raise SystemExit("decode_bench.py needs a CUDA GPU")
    evosdpa = import_evosdpa()
    fa, fa_info = flash_attn_module()
    if fa is None:
        print(f"flash_attn does not import ({fa_info['error']}): no flash_attn_with_kvcache peer", file=sys.stderr)

    dtypes = {"fp16": [("fp16", torch.float16)], "bf16": [("bf16", torch.bfloat16)],
              "both": [("fp16", torch.float16), ("bf16", torch.bfloat16)]}[args.dtype]
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    scratch = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    timer = Timer(torch, args.iters, args.warmup, scratch)
    if timer.cycles_per_us is None:
        print("torch.cuda._sleep is missing: timings include the host's launch overhead", file=sys.stderr)
    copy = copy_bandwidth(torch, timer)
    gqa = sdpa_gqa_mode(torch, F)
    print(f"{props.name}, torch {torch.__version__}, evosdpa {evosdpa.__version__} "
          f"(library {evosdpa.library_version()} at {evosdpa.library_path()}), kernel {args.kernel or 'auto'}")
    print(f"device-to-device copy of 1 GiB: {copy['gb_per_s']:.0f} GB/s (2 x bytes / median of {copy['runs']} "
          f"runs, {copy['us_median']:.1f} µs)")
    if gqa != "enable_gqa":
        print("this torch's SDPA lacks enable_gqa: K/V heads are expanded with repeat_interleave before timing "
              f"(SDPA then reads {HEADS_Q // HEADS_KV}x the bytes; bandwidths count the cache's)")
    print(f"Hq/Hkv {HEADS_Q}/{HEADS_KV}, D {HEAD_DIM}, Lq {SEQLEN_Q}, page size {args.page_size}, "
          f"L2 flushed ({FLUSH_BYTES >> 20} MiB written and read) before every call, median of {args.iters} runs")
    print_header()

    env = {"torch": torch, "F": F, "evosdpa": evosdpa, "sdpa_kernel": sdpa_kernel, "SDPBackend": SDPBackend,
           "timer": timer, "gqa": gqa, "flash_attn": fa}
    rows = []
    for dtype_name, dtype in dtypes:
        for b in batches:
            for length in lengths:
                row = run_point(env, dtype_name, dtype, b, length, args, copy["gb_per_s"])
                rows.append(row)
                print_row(row)
                sys.stdout.flush()

    crit = summary(rows)
    for dt, s in crit.items():
        print(f"{dt}: caches >= {short_length(BW_TARGET_FROM)} at >= {BW_TARGET:.0%} of copy: dense "
              f"{s['dense_bandwidth_met']}/{s['dense_bandwidth_points']}, paged "
              f"{s['paged_bandwidth_met']}/{s['paged_bandwidth_points']}; faster than the best SDPA backend: "
              f"{s['faster_than_sdpa']}/{s['sdpa_points']}; verification failures: {s['verify_fail']}")
    if args.json:
        report = {
            **run_info(torch, evosdpa, props, args.kernel), "cudnn": torch.backends.cudnn.version(),
            "flash_attn": fa_info, "sdpa_gqa": gqa,
            "grid": args.grid, "iters": args.iters, "warmup": args.warmup, "page_size": args.page_size,
            "heads_q": HEADS_Q, "heads_kv": HEADS_KV, "head_dim": HEAD_DIM, "seqlen_q": SEQLEN_Q,
            "l2_flush_bytes": FLUSH_BYTES, "tolerance": TOLERANCE,
            "timing": ("CUDA events around each call, the L2 flushed before it (scratch written, then read), "
                       "a GPU-side spin before the flush hiding host launch overhead" if timer.cycles_per_us else
                       "CUDA events around each call, the L2 flushed before it (scratch written, then read; no "
                       "torch.cuda._sleep: host launch overhead included)"),
            "copy": copy, "criteria": crit, "results": rows,
        }
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        print(f"wrote {args.json}")
    if any(r["status"] == "FAIL" for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
