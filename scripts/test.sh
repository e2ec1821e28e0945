#!/usr/bin/env bash
# Build evosdpa and run its tests (CPU tests everywhere; the GPU suite reports "skipped" without a GPU).
# Installs what a fresh Debian machine lacks (GoogleTest, CMake) first. The CUDA toolkit must be there.
#   scripts/test.sh [BUILD_DIR]       (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v nvcc >/dev/null 2>&1 || export PATH="/usr/local/cuda/bin:$PATH"
build=${1:-build}
scripts/install-deps.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure
