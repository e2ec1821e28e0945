"""Time PyTorch SDPA backends (flash = FlashAttention-2, cudnn, efficient) on evosdpa-bench's shapes.

Same method as evosdpa-bench: CUDA events around each call after warm-up, median of many runs, warm L2;
--graph times CUDA-graph replays (forward only). --pass bwd times the backward alone and fwdbwd a
forward then its backward, of flash and cudnn (the training peers), with FLOPs counted as evosdpa-bench
counts them: 2.5 and 3.5 times the forward's. Writes JSON rows that bench/compare_peers.py puts beside
evosdpa's.
    python3 bench/torch_peers.py --grid acceptance --dtype fp16 --json peers.json
    python3 bench/torch_peers.py --grid fa3 --dtype both --pass bwd --json peers-bwd.json
"""
import argparse
import json
import statistics
import sys

# A pass's FLOPs in forwards (FlashAttention's count: the backward's five matrix products against two).
FLOP_FACTOR = {"fwd": 1.0, "bwd": 2.5, "fwdbwd": 3.5}


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


def make_call(q, k, v, dout, causal, pass_):
    """The timed call of a pass, under the backend context already entered (the forward picks the backend;
    its autograd node then runs that backend's backward).

    bwd: the backward of one forward, its graph kept by retain_graph for the next run; autograd.grad
    returns fresh gradients, so no accumulation into .grad is timed. fwdbwd: a forward, then its backward.
    """
    import torch
    import torch.nn.functional as F

    def forward():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    if pass_ == "fwd":
        return forward
    if pass_ == "bwd":
        out = forward()
        return lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    return lambda: torch.autograd.grad(forward(), (q, k, v), dout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", default="acceptance")
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "bf16", "both"])
    ap.add_argument("--pass", dest="pass_", default="fwd", choices=list(FLOP_FACTOR))
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--graph", action="store_true")
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    if args.graph and args.pass_ != "fwd":
        ap.error("--graph replays the forward only (a captured backward would need its forward on the capture stream)")

    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    if args.pass_ != "fwd":
        del backends["efficient"]
    dtypes = {"fp16": [torch.float16], "bf16": [torch.bfloat16], "both": [torch.float16, torch.bfloat16]}[args.dtype]
    with_grad = args.pass_ != "fwd"
    pass_tag = f" {args.pass_}" if with_grad else ""
    rows = []
    for dtype in dtypes:
        for (b, h, length, d, causal) in grid(args.grid):
            q, k, v = (torch.randn(b, h, length, d, device="cuda", dtype=dtype, requires_grad=with_grad)
                       for _ in range(3))
            dout = torch.randn(b, h, length, d, device="cuda", dtype=dtype) if with_grad else None
            for name, backend in backends.items():
                row = {"batch": b, "heads": h, "seqlen_q": length, "seqlen_k": length, "head_dim": d,
                       "dtype": "fp16" if dtype == torch.float16 else "bf16",
                       "causal": "top-left" if causal else "none", "kernel": "torch_" + name, "pass": args.pass_}
                try:
                    with sdpa_kernel([backend]):
                        call = make_call(q, k, v, dout, causal, args.pass_)
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
                    flops = 4 * b * h * pairs * d * FLOP_FACTOR[args.pass_]
                    row["tflops"] = flops / (row["us_median"] * 1e-6) / 1e12
                    row["ok"] = True
                except Exception as e:  # a backend that does not run this shape is reported, not fatal
                    row["ok"] = False
                    row["error"] = str(e).splitlines()[0][:200]
                rows.append(row)
                print(f"{row['kernel']:16s}{pass_tag} B{b} H{h} L{length} D{d} {row['dtype']} causal={causal}: "
                      f"{row.get('us_median', float('nan')):.2f} us", file=sys.stderr)
    with open(args.json, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "cudnn": torch.backends.cudnn.version(), "graph": args.graph, "pass": args.pass_,
                   "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
