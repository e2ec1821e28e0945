#!/usr/bin/env bash
# On a GPU machine: the full benchmark of record. evosdpa-bench (evosdpa's kernel and cuDNN's SDPA called
# directly through cudnn_frontend) and PyTorch SDPA peers (flash, cudnn, efficient) on the acceptance grid (plain and CUDA-graph replay) and the fa3 grid, fp16 and bf16 (and FP8 on the fa3 grid), all
# in one session; then the backward on the fa3 grid, fp16 and bf16, in both modes, beside PyTorch's flash
# and cudnn backwards; JSON results, benchmarks.md and benchmarks.png (the table and plot of record, to copy
# into docs/) in OUT_DIR.
#   scripts/benchmarks.sh OUT_DIR [BUILD_DIR] [PART]
# PART (default all) runs a part alone, so that each fits a time-limited command; every part ends by
# rewriting benchmarks.md from all the results OUT_DIR holds:
#   fwd                 the forward tables (acceptance, graph replay, fa3, FP8) and their peers
#   bwd                 bwd-deterministic, bwd-fast and bwd-peers
#   bwd-deterministic   evosdpa's and cuDNN direct's backward, deterministic (one evosdpa-bench run per dtype)
#   bwd-fast            the same in the fast mode
#   bwd-peers           PyTorch's flash and cudnn backwards
#   decode              decoding against a KV cache, dense and paged, beside PyTorch SDPA (bench/decode_bench.py,
#                       through the Python package in python/ and BUILD_DIR's libevosdpa.so)
#   varlen              packed (variable-length) prefill beside the dense forward on the same tokens
#                       (bench/varlen_bench.py, likewise)
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/benchmarks.sh OUT_DIR [BUILD_DIR] [all|fwd|bwd|bwd-deterministic|bwd-fast|bwd-peers|decode|varlen]"
out=${1:?$usage}
build=${2:-build}
part=${3:-all}
case $part in
  all | fwd | bwd | bwd-deterministic | bwd-fast | bwd-peers | decode | varlen) ;;
  *) echo "unknown part '$part'; $usage" >&2; exit 2 ;;
esac
mkdir -p "$out"
bench="$build/bench/evosdpa-bench"
export PYTHONUNBUFFERED=1
# The direct cuDNN peer dlopens libcudnn.so.9: use the one PyTorch ships if the loader has none.
if [ -z "${EVOSDPA_CUDNN_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcudnn.so.9 '; then
  for dir in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    lib=$(find "$dir" -name 'libcudnn.so.9' 2>/dev/null | head -n 1)
    if [ -n "$lib" ]; then export LD_LIBRARY_PATH="$(dirname "$lib"):${LD_LIBRARY_PATH:-}"; break; fi
  done
fi
# evosdpa as users get it ("auto"; the table names the kernel that ran), and cuDNN direct.
kernels=auto,cudnn

run_fwd() {
  "$bench" --grid acceptance --dtype both --kernel $kernels --json "$out/acc.json" >/dev/null
  "$bench" --grid acceptance --dtype both --kernel $kernels --graph --json "$out/acc-graph.json" >/dev/null
  "$bench" --grid fa3 --dtype both --kernel $kernels --iters 30 --json "$out/fa3.json" >/dev/null
  # FP8: the bench exits 1 when a row fails its check, which cuDNN's E4M3 output does at most fa3 points on
  # Hopper (docs/fp8-design.md); the table marks each row's check, evosdpa's included.
  "$bench" --grid fa3 --dtype fp8 --kernel $kernels --iters 30 --json "$out/fa3-fp8.json" >/dev/null ||
    echo "note: FP8 rows failed their float64 check: see the FP8 table"
  [ -s "$out/fa3-fp8.json" ] || { echo "the FP8 run wrote no results: $out/fa3-fp8.json" >&2; exit 1; }
  python3 bench/torch_peers.py --grid acceptance --dtype both --json "$out/peers.json"
  python3 bench/torch_peers.py --grid acceptance --dtype both --graph --json "$out/peers-graph.json"
  python3 bench/torch_peers.py --grid fa3 --dtype both --iters 30 --json "$out/peers-fa3.json"
}

# evosdpa's and cuDNN direct's backward in mode $1 on the fa3 grid, one evosdpa-bench run per dtype (each a
# few minutes: every row is verified against float64 first). A row that fails or that cuDNN cannot run
# makes the bench exit 1 and is marked in the table; a run that writes no JSON stops the script.
run_bwd() {
  local mode=$1 dtype json
  for dtype in fp16 bf16; do
    json="$out/fa3-bwd-$mode-$dtype.json"
    rm -f "$json"
    "$bench" --pass bwd --bwd-mode "$mode" --grid fa3 --dtype $dtype --kernel $kernels --iters 30 --json "$json" \
      >/dev/null || echo "note: $mode $dtype backward rows failed or did not run: see their table"
    [ -s "$json" ] || { echo "the backward run wrote no results: $json" >&2; exit 1; }
  done
}

run_bwd_peers() {
  python3 bench/torch_peers.py --grid fa3 --dtype both --pass bwd --iters 30 --json "$out/peers-fa3-bwd.json"
}

# evosdpa.attention_with_kvcache from this tree (python/) on BUILD_DIR's library, fp16 and bf16. A point that
# fails its check (decode_bench.py exits 1) is marked in the table; a run that writes no JSON stops the script.
run_decode() {
  local json="$out/decode.json"
  rm -f "$json"
  PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" \
    EVOSDPA_LIBRARY="${EVOSDPA_LIBRARY:-$(cd "$build" && pwd)/libevosdpa.so}" \
    python3 bench/decode_bench.py --grid full --dtype both --json "$json" ||
    echo "note: decode points failed their check or did not run: see the decode table"
  [ -s "$json" ] || { echo "the decode run wrote no results: $json" >&2; exit 1; }
}

# evosdpa.attention_varlen from this tree on BUILD_DIR's library against evosdpa.attention on the same tokens,
# fp16 and bf16, D 64 and 128, causal and not (varlen_bench.py exits 1 on a failed check, as decode's does).
run_varlen() {
  local json="$out/varlen.json"
  rm -f "$json"
  PYTHONPATH="$PWD/python:$PWD/bench${PYTHONPATH:+:$PYTHONPATH}" \
    EVOSDPA_LIBRARY="${EVOSDPA_LIBRARY:-$(cd "$build" && pwd)/libevosdpa.so}" \
    python3 bench/varlen_bench.py --json "$json" ||
    echo "note: varlen points failed their check or did not run: see the varlen table"
  [ -s "$json" ] || { echo "the varlen run wrote no results: $json" >&2; exit 1; }
}

# The GPU's SM clock, power and temperature every 200 ms while the part runs (nvidia-smi, where there is
# one): the long fa3 points run at the clock the power limit allows, not at the idle GPU's boost clock.
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 200 \
    >"$out/clocks-$part.csv" 2>/dev/null &
  clock_log=$!
  trap 'kill $clock_log 2>/dev/null || true' EXIT
fi

case $part in
  all) run_fwd; run_bwd deterministic; run_bwd fast; run_bwd_peers; run_decode; run_varlen ;;
  fwd) run_fwd ;;
  bwd) run_bwd deterministic; run_bwd fast; run_bwd_peers ;;
  bwd-deterministic) run_bwd deterministic ;;
  bwd-fast) run_bwd fast ;;
  bwd-peers) run_bwd_peers ;;
  decode) run_decode ;;
  varlen) run_varlen ;;
esac
python3 bench/make_benchmarks_md.py "$out" --out "$out/benchmarks.md" --plot "$out/benchmarks.png"
echo "results in $out; copy benchmarks.md and benchmarks.png into docs/"
