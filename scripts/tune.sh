#!/usr/bin/env bash
# Tune evosdpa for this machine's GPU in one command (evosdpa-tune, issue 10): build, run the elite
# search of each tunable family and head size on a shape grid, starting from the hand-made table and
# resuming saved states (a search that has finished is skipped, so after a time limit the same command
# goes on where it stopped), then write this GPU model's table into the source tree and rebuild, so
# that the library uses it on this model (compute capability and SM count) and nowhere else.
#   scripts/tune.sh [--grid fa3|acceptance] [--seconds S] [--seed N] [--dir DIR] [--no-build]
# --grid: the shapes whose geometric-mean speedup is the fitness (default fa3, the benchmark's grid);
# --seconds: wall-clock budget of each search in this run (default none: until it converges);
# --seed: the search's seed (default 1; a resumed search keeps its own); --dir: states, reports and
# charts (default tune-runs/; a state measured on another GPU model is refused, so use one per model);
# --no-build: use the build in EVOSDPA_BUILD_DIR (default build) as it is, and do not rebuild after.
# Tuned: mma_sm80, D = 64 and 128, its default and small-grid rows; on Hopper (compute capability 9.x)
# also wgmma_sm90's 16-bit rows (D = 64 with three and two consumers, D = 128, the split_keys rows). Each
# row on the grid's shapes that this GPU runs on it; a row without any is skipped. The tables:
# src/kernels/mma/tuned/ and src/kernels/wgmma/tuned/, file sm<cc>_<SMs>.inc.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v nvcc >/dev/null 2>&1 || export PATH="/usr/local/cuda/bin:$PATH"
build=${EVOSDPA_BUILD_DIR:-build}
grid=fa3 seconds="" seed=1 dir=tune-runs do_build=1
usage() { sed -n '7,16p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --grid) [ $# -ge 2 ] || usage; grid=$2; shift 2 ;;
    --seconds) [ $# -ge 2 ] || usage; seconds=$2; shift 2 ;;
    --seed) [ $# -ge 2 ] || usage; seed=$2; shift 2 ;;
    --dir) [ $# -ge 2 ] || usage; dir=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    *) usage ;;
  esac
done
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "scripts/tune.sh: no NVIDIA GPU here; a table is measured on the GPU model it is for" >&2
  exit 1
fi
if [ "$do_build" = 1 ]; then
  scripts/install-deps.sh
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$(nproc)" --target evosdpa-tune >/dev/null
fi
tune="$build/tune/evosdpa-tune"
[ -x "$tune" ] || { echo "scripts/tune.sh: $tune not built" >&2; exit 1; }
# NVRTC compiles the candidates from this tree's kernel sources.
export EVOSDPA_SOURCE_DIR=${EVOSDPA_SOURCE_DIR:-$PWD}
mkdir -p "$dir"
# search NAME ARGS...: one bucket's search, resumed from $dir/NAME.json; its state joins `states`.
states=()
search() {
  local name="$dir/$1-$grid" rc=0
  shift
  echo "== $* ($grid grid): $name.md"
  "$tune" "$@" --grid "$grid" --seed "$seed" --state "$name.json" --report "$name.md" \
    ${seconds:+--seconds "$seconds"} >/dev/null || rc=$?
  [ "$rc" = 3 ] && return 0  # no shape of the grid runs on this row here
  [ "$rc" = 0 ] || exit "$rc"
  grep -m1 '^Generation' "$name.md" || true
  states+=("$name.json")
}
for d in 64 128; do
  search "mma_sm80-d$d-default" --head-dim "$d"
  search "mma_sm80-d$d-small-grid" --head-dim "$d" --small-grid
done
"$tune" --emit-table src/kernels/mma/tuned "${states[@]}"
cc_major=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | cut -d. -f1)
if [ "$cc_major" = 9 ]; then
  states=()
  search wgmma_sm90-d64-c3 --family wgmma_sm90 --head-dim 64 --consumers 3
  search wgmma_sm90-d64-c2 --family wgmma_sm90 --head-dim 64 --consumers 2
  search wgmma_sm90-d128-c2 --family wgmma_sm90 --head-dim 128 --consumers 2
  search wgmma_sm90-d64-c2-split-keys --family wgmma_sm90 --head-dim 64 --consumers 2 --split-keys
  search wgmma_sm90-d128-c2-split-keys --family wgmma_sm90 --head-dim 128 --consumers 2 --split-keys
  [ ${#states[@]} -gt 0 ] && "$tune" --emit-table src/kernels/wgmma/tuned "${states[@]}"
fi
if [ "$do_build" = 1 ]; then
  cmake --build "$build" -j"$(nproc)" >/dev/null
  echo "rebuilt $build with the table"
else
  echo "rebuild to compile the table in: cmake --build $build"
fi
