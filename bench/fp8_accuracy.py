"""RMSE of FP8 attention against float64 on the unquantised inputs (issue 9's accuracy table; the
FlashAttention-3 paper's test): inputs N(0, 1), and N(0, 1) with 0.1% of the entries multiplied by 10
(outliers), quantised by evosdpa.quantize_fp8 per tensor or per (batch, head); 16-bit runs beside them.

    python3 bench/fp8_accuracy.py [--kernels auto,mma_fp8_sm89,reference] [--emulate] [--markdown FILE]

Each FP8 configuration is also run with Q and K rotated by one random-sign Hadamard matrix along the head
dimension before quantisation (Q K^T is unchanged; outliers spread over the dimensions: the paper's
"incoherent processing"), marked "+ hadamard".

On a GPU it runs evosdpa's kernels. --emulate (no GPU needed) runs the CPU model of an FP8 kernel instead:
float32 scores, P = 2^(S - m + 8) rounded to E4M3, row sums of the unrounded P, O rounded to bf16 (the
library's FP8 baseline), so the table's method can be checked anywhere; its figures are the model's.
"""
import argparse
import math


def reference(q, k, v, causal):
    """float64 attention of float tensors [B, H, L, D] (equal heads)."""
    s = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        lq, lk = s.shape[-2:]
        mask = torch.ones(lq, lk, dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v.double()


def emulated_fp8(q8, k8, v8, qd, kd, vd, causal, out_dtype):
    """The CPU model of an FP8 kernel (see the module docstring), on the dequantised inputs."""
    q, k, v = (evosdpa_dequantize(t, d) for t, d in ((q8, qd), (k8, kd), (v8, vd)))
    s = (q.double() @ k.double().transpose(-1, -2)).float() / math.sqrt(q.shape[-1])
    if causal:
        lq, lk = s.shape[-2:]
        s = s.masked_fill(~torch.ones(lq, lk, dtype=torch.bool).tril(), float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    p = torch.exp2((s - m) * math.log2(math.e) + 8.0)
    l = p.sum(dim=-1, keepdim=True, dtype=torch.float64).float()
    pv = (p.to(torch.float8_e4m3fn).double() @ v.double()).float()
    return (pv / l).to(out_dtype)


def evosdpa_dequantize(x8, d):
    x = x8.float()
    if d.dim() == 2:
        return x * d.repeat_interleave(x.shape[1] // d.shape[1], dim=1)[:, :, None, None]
    return x * d


def inputs(kind, shape, gen, device):
    q, k, v = (torch.randn(shape, generator=gen, device=device) for _ in range(3))
    if kind == "outliers":  # 0.1% of the entries x10
        for t in (q, k, v):
            pick = torch.rand(shape, generator=gen, device=device) < 1e-3
            t[pick] *= 10
    return q, k, v


def hadamard(n, gen, device):
    """An n x n orthogonal matrix: the Sylvester Hadamard matrix / sqrt(n) with random column signs."""
    h = torch.ones(1, 1)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    signs = torch.randint(0, 2, (n,), generator=gen, device=device).cpu().float() * 2 - 1
    return ((h * signs[None, :]) / math.sqrt(n)).to(device)


def rmse(out, ref):
    return (out.double() - ref).pow(2).mean().sqrt().item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seqlen", type=int, default=1024)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--kernels", default="auto")
    ap.add_argument("--emulate", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--markdown")
    args = ap.parse_args()

    global torch
    import torch
    import evosdpa

    device = "cpu" if args.emulate else "cuda"
    gen = torch.Generator(device=device).manual_seed(args.seed)
    shape = (args.batch, args.heads, args.seqlen, args.head_dim)
    rows = []
    for kind in ("normal", "outliers"):
        q, k, v = inputs(kind, shape, gen, device)
        ref = reference(q, k, v, args.causal)
        rot = hadamard(args.head_dim, gen, device)
        if not args.emulate:
            for dt in (torch.float16, torch.bfloat16):
                out = evosdpa.attention(q.to(dt), k.to(dt), v.to(dt), causal=args.causal)
                rows.append((kind, str(dt).replace("torch.", ""), "-", "auto", rmse(out, ref)))
        for granularity, rotate in (("tensor", False), ("head", False), ("tensor", True), ("head", True)):
            qq, kk = (q @ rot, k @ rot) if rotate else (q, k)
            (q8, qd), (k8, kd), (v8, vd) = (evosdpa.quantize_fp8(t, granularity) for t in (qq, kk, v))
            label = granularity + (" + hadamard" if rotate else "")
            if args.emulate:
                out = emulated_fp8(q8, k8, v8, qd, kd, vd, args.causal, torch.bfloat16)
                rows.append((kind, "fp8 (e4m3) -> bf16", label, "CPU model", rmse(out, ref)))
                continue
            for kernel in args.kernels.split(","):
                out = evosdpa.attention(q8, k8, v8, causal=args.causal, kernel=kernel, q_descale=qd, k_descale=kd,
                                        v_descale=vd, out_dtype=torch.bfloat16)
                rows.append((kind, "fp8 (e4m3) -> bf16", label, kernel, rmse(out, ref)))
    title = (f"B={args.batch} H={args.heads} L={args.seqlen} D={args.head_dim}"
             f"{' causal' if args.causal else ''}, RMSE against float64 on the unquantised inputs")
    lines = [f"**{title}**", "", "| inputs | dtype | descales | kernel | RMSE |", "|---|---|---|---|---:|"]
    lines += [f"| {a} | {b} | {c} | {d} | {e:.2e} |" for a, b, c, d, e in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
