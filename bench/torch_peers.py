"""Time PyTorch SDPA backends (flash = FlashAttention-2, cudnn, efficient) on evosdpa-bench's shapes.

Same method as evosdpa-bench: CUDA events around each call after warm-up, median of many runs, warm L2;
--graph times CUDA-graph replays. Writes JSON rows that bench/compare_peers.py puts beside evosdpa's.
    python3 bench/torch_peers.py --grid acceptance --dtype fp16 --json peers.json
"""
import argparse
import json
import statistics
import sys


def grid(name):
    if name == "acceptance":
        return [(1, 8, 512, 64, False), (1, 8, 512, 64, True), (2, 8, 2048, 64, False),
                (2, 8, 2048, 64, True), (2, 8, 2048, 128, False)]
    if name == "fa3":
        out = []
        for causal in (False, True):
            for d in (64, 128):
                length = 512
                while length <= 16384:
                    out.append((16384 // length, 2048 // d, length, d, causal))
                    length *= 2
        return out
    raise SystemExit(f"unknown grid {name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", default="acceptance")
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "bf16", "both"])
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--graph", action="store_true")
    ap.add_argument("--json", required=True)
    args = ap.parse_args()

    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    dtypes = {"fp16": [torch.float16], "bf16": [torch.bfloat16], "both": [torch.float16, torch.bfloat16]}[args.dtype]
    rows = []
    for dtype in dtypes:
        for (b, h, length, d, causal) in grid(args.grid):
            q, k, v = (torch.randn(b, h, length, d, device="cuda", dtype=dtype) for _ in range(3))
            for name, backend in backends.items():
                row = {"batch": b, "heads": h, "seqlen_q": length, "seqlen_k": length, "head_dim": d,
                       "dtype": "fp16" if dtype == torch.float16 else "bf16",
                       "causal": "top-left" if causal else "none", "kernel": "torch_" + name}
                try:
                    with sdpa_kernel([backend]):
                        call = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                        for _ in range(args.warmup):
                            call()
                        torch.cuda.synchronize()
                        if args.graph:
                            g = torch.cuda.CUDAGraph()
                            s = torch.cuda.Stream()
                            with torch.cuda.stream(s):
                                call()
                                torch.cuda.synchronize()
                                with torch.cuda.graph(g):
                                    call()
                            run = g.replay
                        else:
                            run = call
                        times = []
                        for _ in range(args.iters):
                            start = torch.cuda.Event(enable_timing=True)
                            end = torch.cuda.Event(enable_timing=True)
                            start.record()
                            run()
                            end.record()
                            end.synchronize()
                            times.append(start.elapsed_time(end) * 1000.0)
                    row["us_median"] = statistics.median(times)
                    row["us_min"] = min(times)
                    pairs = length * (length + 1) / 2 if causal else length * length
                    row["tflops"] = 4 * b * h * pairs * d / (row["us_median"] * 1e-6) / 1e12
                    row["ok"] = True
                except Exception as e:  # a backend that does not run this shape is reported, not fatal
                    row["ok"] = False
                    row["error"] = str(e).splitlines()[0][:200]
                rows.append(row)
                print(f"{row['kernel']:16s} B{b} H{h} L{length} D{d} {row['dtype']} causal={causal}: "
                      f"{row.get('us_median', float('nan')):.2f} us", file=sys.stderr)
    with open(args.json, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "cudnn": torch.backends.cudnn.version(), "graph": args.graph, "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
