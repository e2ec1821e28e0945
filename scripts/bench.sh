#!/usr/bin/env bash
# Build evosdpa and run the main job: evosdpa-bench on the default shape (B=1 H=8 L=512 D=64 fp16),
# verified against the float64 CPU reference, then timed. Extra arguments go to evosdpa-bench
# (--help lists them; --pass bwd times the backward instead). On a machine without a GPU it says so and
# exits non-zero.
#   scripts/bench.sh [evosdpa-bench options]
#   scripts/bench.sh --pass bwd --bwd-mode fast --grid acceptance --dtype both
set -euo pipefail
cd "$(dirname "$0")/.."
command -v nvcc >/dev/null 2>&1 || export PATH="/usr/local/cuda/bin:$PATH"
build=${EVOSDPA_BUILD_DIR:-build}
scripts/install-deps.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target evosdpa-bench >/dev/null
exec "$build/bench/evosdpa-bench" "$@"
