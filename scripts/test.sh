#!/usr/bin/env bash
# Build evosdpa and run its tests: the C++ suites through CTest (the GPU suite reports "skipped" without a
# GPU), then `pip install .` of the Python package into a virtual environment and its pytest suite.
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

# The Python package: `pip install .` into a private virtual environment, then its tests (those that need
# PyTorch or a GPU report skipped without them).
python3 -m venv "$build/venv"
"$build/venv/bin/pip" install -q --disable-pip-version-check "pytest==8.3.3" .
"$build/venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
