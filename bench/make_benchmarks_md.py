"""Write docs/benchmarks.md (and a TFLOP/s-against-length plot) from the JSON results of one session.

    python3 bench/make_benchmarks_md.py RESULTS_DIR [--out docs/benchmarks.md] [--plot docs/benchmarks.png]
RESULTS_DIR holds what scripts/benchmarks.sh writes: acc.json, peers.json, acc-graph.json, peers-graph.json,
fa3.json, peers-fa3.json and fa3-fp8.json (forward); fa3-bwd-{deterministic,fast}-{fp16,bf16}.json and
peers-fa3-bwd.json (backward); decode.json (bench/decode_bench.py: decode against a KV cache); varlen.json
(bench/varlen_bench.py: packed prefill). A section whose files are missing is left out. The plot needs matplotlib; without it the table is still written.
"""
import argparse
import glob
import json
import os

# Column titles of the PyTorch SDPA backends.
PEER_TITLES = {"torch_flash": "FA2", "torch_cudnn": "cuDNN", "torch_efficient": "efficient"}
BWD_MODES = ("deterministic", "fast")


def key(r):
    """Shape, dtype, pass and mask (last; reports from before passes existed are forwards)."""
    return (r["batch"], r["heads"], r["seqlen_q"], r["seqlen_k"], r["head_dim"], r["dtype"], r.get("pass", "fwd"),
            "none" if r["causal"] == "none" else "causal")


def load(d, name):
    path = os.path.join(d, name)
    return json.load(open(path)) if os.path.exists(path) else None


def load_merged(d, names):
    """The reports of one run split over several files (one evosdpa-bench run per dtype), as one: the
    first file's header with every file's results; None when none exists."""
    reports = [r for r in (load(d, n) for n in names) if r]
    if not reports:
        return None
    merged = dict(reports[0])
    merged["results"] = [row for r in reports for row in r["results"]]
    return merged


def table(ours, peers, kernel="auto", names=("torch_flash", "torch_cudnn", "torch_efficient")):
    """evosdpa as `kernel` was asked for ("auto": what a user gets; the kernel column says which ran), the
    PyTorch backends `names` and cuDNN direct; ratios against every peer but the memory-efficient backend."""
    pr = {(key(r), r["kernel"]): r for r in peers["results"] if r.get("ok")} if peers else {}
    direct = {key(r): r for r in ours["results"] if r["ok"] and r["ran"] == "cudnn"}
    titles = [PEER_TITLES[n] for n in names] + ["cuDNN direct"]
    compared = [i for i, n in enumerate(names) if n != "torch_efficient"] + [len(names)]
    lines = ["| shape | kernel | evosdpa µs | TFLOP/s | " + " | ".join(f"{t} µs" for t in titles) + " | " +
             " | ".join(f"vs {titles[i]}" for i in compared) + " | verify |",
             "|---|---|---:|---:|" + "---:|" * (len(titles) + len(compared)) + "---|"]
    for r in ours["results"]:
        if not r["ok"] or r["kernel"] != kernel:
            continue
        k = key(r)
        shape = f"B{r['batch']} H{r['heads']} L{r['seqlen_q']} D{r['head_dim']} {r['dtype']} {k[-1]}"
        t = [pr.get((k, n)) for n in names] + [direct.get(k)]
        cell = [f"{p['us_median']:.1f}" if p else "-" for p in t]
        ratio = [f"{t[i]['us_median'] / r['us_median']:.2f}×" if t[i] else "-" for i in compared]
        lines.append(f"| {shape} | {r['ran']} | {r['us_median']:.1f} | {r['tflops']:.0f} | " + " | ".join(cell) + " | " +
                     " | ".join(ratio) + f" | {r['verify'].split(' err')[0]} |")
    return "\n".join(lines)


def backward_section(bwd, peers):
    """The backward tables, one per mode that ran, with the training peers (flash and cudnn)."""
    out = ["## Backward, fa3 grid", "",
           "FLOPs as FlashAttention counts them: a backward is 2.5 forwards (five matrix products against two), "
           "so TFLOP/s = 2.5 × the forward's FLOPs / time, masked pairs left out for causal. Each backward is "
           "timed alone, on O and lse its own forward made before each batch of runs (`evosdpa-bench --pass bwd`; "
           "`torch_peers.py --pass bwd`: `torch.autograd.grad` on a graph built once). The PyTorch peers run "
           "in their default mode (FlashAttention-2 sums dQ with atomics: not deterministic) in both tables; "
           "cuDNN direct in the table's mode (`set_deterministic_algorithm`). evosdpa's and cuDNN direct's dQ, "
           "dK and dV are verified against float64 on sampled rows and keys of every head before timing.", ""]
    titles = {"deterministic": "Deterministic (evosdpa's default: dQ summed in a fixed order)",
              "fast": "Fast (dQ summed with float32 atomics, as FlashAttention-2 does)"}
    for mode in BWD_MODES:
        if bwd.get(mode):
            out += [f"### {titles[mode]}", "", table(bwd[mode], peers, names=("torch_flash", "torch_cudnn")), ""]
    return out


def fp8_table(ours):
    """FP8 (E4M3) inputs against cuDNN's sdpa_fp8, whose timings are shown even where its output fails the
    float64 check (marked): on Hopper it writes O in E4M3 (docs/fp8-design.md)."""
    cudnn = {key(r): r for r in ours["results"] if r["kernel"] == "cudnn"}
    lines = ["| shape | kernel | evosdpa µs | TFLOP/s | cuDNN FP8 µs | TFLOP/s | cuDNN FP8 check | vs cuDNN FP8 | verify |",
             "|---|---|---:|---:|---:|---:|---|---:|---|"]
    for r in ours["results"]:
        if r["kernel"] != "auto":
            continue
        k = key(r)
        shape = f"B{r['batch']} H{r['heads']} L{r['seqlen_q']} D{r['head_dim']} {r['dtype']} {k[-1]}"
        if not r["ok"]:
            lines.append(f"| {shape} | {r['ran']} | - | - | - | - | - | - | {r['verify'] or r['error']} |")
            continue
        c = cudnn.get(k)
        if c is not None and c["us_median"] > 0:  # timed, whatever its check said
            check = c["verify"].split(" err")[0]
            c_us, c_tf, ratio = f"{c['us_median']:.1f}", f"{c['tflops']:.0f}", f"{c['us_median'] / r['us_median']:.2f}×"
        else:  # not run: cuDNN's reason, if any
            check = (c["error"] or "-") if c is not None else "-"
            c_us = c_tf = ratio = "-"
        lines.append(f"| {shape} | {r['ran']} | {r['us_median']:.1f} | {r['tflops']:.0f} | {c_us} | {c_tf} | {check} | "
                     f"{ratio} | {r['verify'].split(' err')[0]} |")
    return "\n".join(lines)


def decode_section(dec):
    """Decode against a KV cache (bench/decode_bench.py's decode.json): a table per dtype."""
    copy = dec["copy"]["gb_per_s"]
    fa = dec.get("flash_attn") or {}
    out = ["## Decode against a KV cache", "",
           f"`evosdpa.attention_with_kvcache` (kernel `{dec['kernel']}`), one new token per sequence (Lq "
           f"{dec['seqlen_q']}), Hq/Hkv {dec['heads_q']}/{dec['heads_kv']}, D {dec['head_dim']}, every sequence's "
           f"cache full; paged: pages of {dec['page_size']} keys in shuffled order through a block table. "
           "GB/s = the K and V bytes read (2 × B × L × Hkv × D × element size) / median time; % of copy: against "
           f"the device-to-device copy bandwidth measured in the same process, {copy:.0f} GB/s (2 × 1 GiB / "
           f"time of `dst.copy_(src)`). Unlike the other tables, L2 is flushed ({dec['l2_flush_bytes'] >> 20} MiB "
           f"written, then read) before every call, and a call's time is its GPU time (CUDA events, host launch overhead "
           f"hidden behind a GPU-side spin), median of {dec['iters']} runs. Best SDPA: the fastest of PyTorch's "
           f"flash, efficient, cudnn and math backends on the dense cache's data (GQA: `{dec['sdpa_gqa']}`); "
           "speedup = its time / evosdpa dense's. evosdpa's outputs are checked against PyTorch's math backend "
           f"in float32 (max abs error ≤ {dec['tolerance']:g}). Issue 12 asks for ≥ 80% of copy at caches of "
           "8k keys and more, and a speedup above 1.", ""]
    with_fa = any(r.get("flash_attn", {}).get("dense", {}).get("ok") for r in dec["results"])
    if not fa.get("available"):
        out += [f"flash_attn not importable ({fa.get('error', '-')}): no `flash_attn_with_kvcache` column.", ""]
    for dt in ("fp16", "bf16"):
        rows = [r for r in dec["results"] if r["dtype"] == dt]
        if not rows:
            continue
        titles = ["B", "cache", "dense µs", "GB/s", "% of copy", "paged µs", "GB/s", "% of copy", "best SDPA",
                  "SDPA µs", "speedup"] + (["flash_attn µs"] if with_fa else []) + ["verify"]
        lines = ["| " + " | ".join(titles) + " |", "|" + "---:|" * (len(titles) - 1) + "---|"]
        raised = {}
        for r in rows:
            length = r["seqlen_k"]
            cells = [str(r["batch"]), f"{length // 1024}k" if length % 1024 == 0 else str(length)]
            if r["status"] == "skipped":
                lines.append("| " + " | ".join(cells + ["-"] * (len(titles) - 3) + ["skipped: " + r["reason"]]) + " |")
                continue
            for n in ("dense", "paged"):
                e = r[n]
                cells += ([f"{e['us_median']:.1f}", f"{e['gb_per_s']:.0f}", f"{e['pct_copy']:.0f}%"] if e.get("ok")
                          else ["error", "-", "-"])
            best = r.get("sdpa_best")
            cells += [best["backend"], f"{best['us_median']:.1f}"] if best else ["-", "-"]
            cells.append(f"{r['speedup_vs_sdpa']:.2f}×" if "speedup_vs_sdpa" in r else "-")
            if with_fa:
                f = r.get("flash_attn", {}).get("dense", {})
                cells.append(f"{f['us_median']:.1f}" if f.get("ok") else "-")
            errs = [r[n]["max_abs_err"] for n in ("dense", "paged") if "max_abs_err" in r[n]]
            verdict = "PASS" if r["status"] == "ok" else "FAIL"
            cells.append(f"{verdict} ({max(errs):.1e})" if errs else verdict)
            lines.append("| " + " | ".join(cells) + " |")
            for name, s in r.get("sdpa", {}).items():
                if not s.get("ok"):
                    raised[name] = raised.get(name, 0) + 1
        out += [f"### {dt}", "", "\n".join(lines), ""]
        s = dec.get("criteria", {}).get(dt)
        if s:
            out += [f"Caches ≥ 8k at ≥ 80% of copy: dense {s['dense_bandwidth_met']}/"
                    f"{s['dense_bandwidth_points']}, paged {s['paged_bandwidth_met']}/{s['paged_bandwidth_points']}; faster than the best SDPA "
                    f"backend: {s['faster_than_sdpa']}/{s['sdpa_points']}.", ""]
        if raised:
            ran = sum(1 for r in rows if r["status"] != "skipped")
            out += ["SDPA backends that raised (no kernel for the shape, or out of memory; reasons in decode.json): "
                    + ", ".join(f"{n} at {c} of {ran} points" for n, c in sorted(raised.items())) + ".", ""]
    return out


def varlen_section(var):
    """Packed prefill (bench/varlen_bench.py's varlen.json): one table per dtype."""
    out = ["## Variable-length (packed) prefill", "",
           f"`evosdpa.attention_varlen` (kernel `{var['kernel']}`) beside `evosdpa.attention` on the same "
           f"{var['total_tokens']} tokens, H {var['heads']} (query and K/V heads). dense: B sequences of L tokens as "
           "a [B, L, H, D] batch; equal: the same tokens packed with cu_seqlens 0, L, 2L, … (equal work); mixed: B "
           f"sequences of lengths drawn between L/4 and 7L/4 (seed {var['mixed_seed']}) summing to the same total. "
           "TFLOP/s = 4 × D × H × the (query, key) pairs computed (n² per sequence, n (n + 1) / 2 causal) / median "
           "time; ratio = TFLOP/s over dense's at the same point. Warm L2, GPU time (CUDA events, a GPU-side spin "
           f"hiding host launch overhead), median of {var['iters']} runs; every output checked against PyTorch's "
           f"math backend in float32 per sequence (max abs error ≤ {var['tolerance']:g}). Issue 12 asks equal work "
           f"within 5% of dense (ratio ≥ {var['equal_target']:g}).", ""]
    for dt in ("fp16", "bf16"):
        rows = [r for r in var["results"] if r["dtype"] == dt]
        if not rows:
            continue
        titles = ["D", "causal", "L", "B", "dense µs", "TFLOP/s", "equal µs", "TFLOP/s", "ratio", "mixed µs",
                  "TFLOP/s", "ratio", "verify"]
        lines = ["| " + " | ".join(titles) + " |", "|" + "---:|" * (len(titles) - 1) + "---|"]
        for r in rows:
            cells = [str(r["head_dim"]), "yes" if r["causal"] else "no", str(r["seqlen"]), str(r["batch"])]
            for n in ("dense", "equal", "mixed"):
                e = r[n]
                if not e.get("ok"):
                    cells += ["error", "-"] + (["-"] if n != "dense" else [])
                    continue
                cells += [f"{e['us_median']:.1f}", f"{e['tflops']:.0f}"]
                if n != "dense":
                    cells.append(f"{e['ratio_to_dense']:.3f}" if "ratio_to_dense" in e else "-")
            errs = [r[n]["max_abs_err"] for n in ("dense", "equal", "mixed") if "max_abs_err" in r[n]]
            verdict = "PASS" if r["status"] == "ok" else "FAIL"
            cells.append(f"{verdict} ({max(errs):.1e})" if errs else verdict)
            lines.append("| " + " | ".join(cells) + " |")
        out += [f"### {dt}", "", "\n".join(lines), ""]
        s = var.get("criteria", {}).get(dt)
        if s:
            f3 = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731 (no ratio when every point failed)
            out += [f"Equal work within 5% of dense: {s['equal_meets_target']}/{s['equal_points']} (ratio min "
                    f"{f3(s['equal_ratio_min'])}, median {f3(s['equal_ratio_median'])}); mixed lengths: ratio min "
                    f"{f3(s['mixed_ratio_min'])}, median {f3(s['mixed_ratio_median'])}.", ""]
    return out


def plot(ours, peers, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return False
    fig, axes = plt.subplots(2, 4, figsize=(18, 8), sharex=True)
    panels = [(d, c, dt) for dt in ("fp16", "bf16") for d in (64, 128) for c in ("none", "causal")]
    for ax, (d, c, dt) in zip(axes.flat, panels):
        series = {"evosdpa (auto)": [r for r in ours["results"] if r["ok"] and r["kernel"] == "auto"],
                  "cuDNN direct": [r for r in ours["results"] if r["ok"] and r["ran"] == "cudnn"]}
        for n in ("torch_flash", "torch_cudnn", "torch_efficient"):
            series[n.replace("torch_", "torch ")] = [r for r in peers["results"] if r.get("ok") and r["kernel"] == n]
        for label, rows in series.items():
            pts = sorted((r["seqlen_q"], r["tflops"]) for r in rows
                         if r["head_dim"] == d and r["dtype"] == dt and key(r)[-1] == c)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_title(f"D={d} {dt} {'causal' if c == 'causal' else 'non-causal'}")
        ax.set_xlabel("sequence length (16k tokens per batch)")
        ax.set_ylabel("TFLOP/s")
        ax.grid(True, alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(f"{ours['gpu']}: attention forward, fa3 grid (B = 16384/L, H = 2048/D)")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    return True


def clocks_lines(results):
    """One line per part that logged the GPU's clocks (scripts/benchmarks.sh: nvidia-smi every 200 ms)."""
    lines = []
    for path in sorted(glob.glob(os.path.join(results, "clocks-*.csv"))):
        part = os.path.basename(path)[len("clocks-"):-len(".csv")]
        clock, power, temp = [], [], []
        with open(path) as f:
            for row in f:
                cells = [c.strip() for c in row.split(",")]
                try:
                    clock.append(float(cells[1])), power.append(float(cells[2])), temp.append(float(cells[3]))
                except (IndexError, ValueError):
                    continue
        if not clock:
            continue
        clock.sort()
        lines.append(f"GPU during the `{part}` part (nvidia-smi every 200 ms, {len(clock)} samples): SM clock median "
                     f"{clock[len(clock) // 2]:.0f} MHz (min {clock[0]:.0f}, max {clock[-1]:.0f}), power up to "
                     f"{max(power):.0f} W, temperature up to {max(temp):.0f} °C.")
    return lines + [""] if lines else []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--out", default="docs/benchmarks.md")
    ap.add_argument("--plot", default="docs/benchmarks.png")
    a = ap.parse_args()
    acc, pacc = load(a.results, "acc.json"), load(a.results, "peers.json")
    accg, paccg = load(a.results, "acc-graph.json"), load(a.results, "peers-graph.json")
    fa3, pfa3 = load(a.results, "fa3.json"), load(a.results, "peers-fa3.json")
    fa3_fp8 = load(a.results, "fa3-fp8.json")
    bwd = {m: load_merged(a.results, [f"fa3-bwd-{m}-{dt}.json" for dt in ("fp16", "bf16")]) for m in BWD_MODES}
    pbwd = load(a.results, "peers-fa3-bwd.json")
    decode = load(a.results, "decode.json")
    varlen = load(a.results, "varlen.json")
    meta = fa3 or acc or fa3_fp8 or bwd["deterministic"] or bwd["fast"]
    python_meta = decode or varlen
    if meta is None and python_meta is None:
        raise SystemExit(f"no evosdpa-bench, decode or varlen results in {a.results}")
    peers_meta = pfa3 or pacc or pbwd or {"torch": "-", "cudnn": "-"}
    if meta is None:  # the Python parts alone
        out = ["# Benchmarks of record", "",
               f"GPU: {python_meta['gpu']} (sm {python_meta['compute_capability']}, {python_meta['sm_count']} SMs), "
               f"PyTorch {python_meta['torch']} (CUDA {python_meta['cuda']}), evosdpa {python_meta['library_version']}.", "",
               "Regenerated on a GPU machine by `scripts/benchmarks.sh OUT_DIR` (then copy OUT_DIR/benchmarks.md "
               "here).", ""]
    else:
        out = ["# Benchmarks of record", "",
               f"GPU: {meta['gpu']} (sm {meta['compute_capability']}, {meta['sm_count']} SMs), driver API "
               f"{meta['driver_version']}, CUDA runtime {meta['runtime_version']}, evosdpa commit {meta['git_commit']}; "
               f"peers: PyTorch {peers_meta['torch']}, cuDNN {peers_meta['cudnn']}, timed in the same session.",
               "", "Each row: median of CUDA-event-timed runs after warm-up, warm L2; evosdpa verified against the "
               "float64 CPU reference before timing; evosdpa and cuDNN direct timed in alternating batches of runs "
               "(the same clocks for both). Ratios are peer time / evosdpa time (above 1: evosdpa faster). "
               "FA2 = `torch flash` (FlashAttention-2), cuDNN = `torch cudnn`; cuDNN direct = cuDNN's SDPA called "
               "from evosdpa-bench through cudnn_frontend (same inputs, verified against float64 like evosdpa).", "",
               "Regenerated on a GPU machine by `scripts/benchmarks.sh OUT_DIR` (then copy OUT_DIR/benchmarks.md and "
               "benchmarks.png here).", ""]
    out += clocks_lines(a.results)
    if acc:
        out += ["## Acceptance shapes", "", table(acc, pacc), ""]
    if accg:
        out += ["## Acceptance shapes, CUDA-graph replay (launch overhead removed)", "", table(accg, paccg), ""]
    if fa3:
        out += ["## fa3 grid (16k tokens, hidden 2048)", "", table(fa3, pfa3), ""]
        if pfa3 and plot(fa3, pfa3, a.plot):
            out += [f"![TFLOP/s against sequence length]({os.path.basename(a.plot)})", ""]
    if fa3_fp8:
        out += ["## fa3 grid, FP8 (E4M3) inputs", "",
                "One descale per tensor, evosdpa's O in bf16; cuDNN's `sdpa_fp8` writes O in E4M3 on Hopper and is "
                "checked against float64 with E4M3's rounding of O added to the tolerance. A FAIL in its column: its "
                "output failed that check (docs/fp8-design.md); the time is still shown.", "", fp8_table(fa3_fp8), ""]
    if bwd["deterministic"] or bwd["fast"]:
        out += backward_section(bwd, pbwd)
    if decode:
        out += decode_section(decode)
    if varlen:
        out += varlen_section(varlen)
    open(a.out, "w").write("\n".join(out))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
