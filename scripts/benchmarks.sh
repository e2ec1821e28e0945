#!/usr/bin/env bash
# On a GPU machine: the full benchmark of record. evosdpa-bench and PyTorch SDPA peers (flash, cudnn,
# efficient) on the acceptance grid (plain and CUDA-graph replay) and the fa3 grid, fp16 and bf16, all
# in one session; JSON results, benchmarks.md and benchmarks.png (the table and plot of record, to copy
# into docs/) in OUT_DIR.
#   scripts/benchmarks.sh OUT_DIR [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/benchmarks.sh OUT_DIR [BUILD_DIR]}
build=${2:-build}
mkdir -p "$out"
bench="$build/bench/evosdpa-bench"
export PYTHONUNBUFFERED=1
"$bench" --grid acceptance --dtype both --kernel mma_sm80 --json "$out/acc.json" >/dev/null
"$bench" --grid acceptance --dtype both --kernel mma_sm80 --graph --json "$out/acc-graph.json" >/dev/null
"$bench" --grid fa3 --dtype both --kernel mma_sm80 --iters 30 --json "$out/fa3.json" >/dev/null
python3 bench/torch_peers.py --grid acceptance --dtype both --json "$out/peers.json"
python3 bench/torch_peers.py --grid acceptance --dtype both --graph --json "$out/peers-graph.json"
python3 bench/torch_peers.py --grid fa3 --dtype both --iters 30 --json "$out/peers-fa3.json"
python3 bench/make_benchmarks_md.py "$out" --out "$out/benchmarks.md" --plot "$out/benchmarks.png"
echo "results in $out; copy benchmarks.md and benchmarks.png into docs/"
