"""Put evosdpa-bench results beside PyTorch SDPA peers timed in the same session.

    python3 bench/compare_peers.py EVOSDPA.json PEERS.json [--kernel mma_sm80]
Prints one Markdown row per shape: evosdpa time and TFLOP/s, each peer's time, and speed ratios
(peer time / evosdpa time: above 1 means evosdpa is faster). Rows match on the shape and the pass
(fwd, bwd, fwdbwd: evosdpa-bench's and torch_peers.py's --pass).
"""
import argparse
import json


def key(r):
    """Shape, dtype, pass and mask (last; reports from before passes existed are forwards)."""
    return (r["batch"], r["heads"], r["seqlen_q"], r["seqlen_k"], r["head_dim"], r["dtype"], r.get("pass", "fwd"),
            "none" if r["causal"] == "none" else "causal")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ours")
    ap.add_argument("peers")
    ap.add_argument("--kernel", default=None, help="evosdpa kernel to compare (default: every one)")
    args = ap.parse_args()
    ours = json.load(open(args.ours))
    peers = json.load(open(args.peers))
    peer_rows = {}
    names = []
    for r in peers["results"]:
        if r.get("ok"):
            peer_rows[(key(r), r["kernel"])] = r
            if r["kernel"] not in names:
                names.append(r["kernel"])
    print(f"GPU: {ours['gpu']} | evosdpa {ours['git_commit']} | torch {peers['torch']} cuDNN {peers['cudnn']}"
          f" | graph replay: {ours['mode']['graph']}")
    head = "| shape | kernel | us | TFLOP/s | " + " | ".join(f"{n} us" for n in names) + " | " + \
        " | ".join(f"vs {n}" for n in names) + " |"
    print(head)
    print("|" + "---|" * (4 + 2 * len(names)))
    for r in ours["results"]:
        if not r["ok"] or (args.kernel and r["ran"] != args.kernel):
            continue
        k = key(r)
        pass_ = "" if r.get("pass", "fwd") == "fwd" else f" {r['pass']} {r['bwd_mode']}"
        shape = f"B{r['batch']} H{r['heads']} L{r['seqlen_q']} D{r['head_dim']} {r['dtype']} {k[-1]}{pass_}"
        times, ratios = [], []
        for n in names:
            p = peer_rows.get((k, n))
            times.append(f"{p['us_median']:.1f}" if p else "-")
            ratios.append(f"{p['us_median'] / r['us_median']:.2f}x" if p else "-")
        print(f"| {shape} | {r['ran']} | {r['us_median']:.1f} | {r['tflops']:.0f} | " + " | ".join(times) + " | " +
              " | ".join(ratios) + " |")


if __name__ == "__main__":
    main()
