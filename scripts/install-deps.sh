#!/usr/bin/env bash
# Install the build dependencies that a fresh Debian machine may lack: CMake >= 3.25, GoogleTest and
# nlohmann-json (Debian 12: 3.11.2).
# The CUDA toolkit (nvcc 12.x/13.x) is expected on PATH or in /usr/local/cuda.
set -euo pipefail
missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
[ -f /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
[ -f /usr/include/nlohmann/json.hpp ] || missing+=(nlohmann-json3-dev)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "error: the CUDA toolkit (nvcc) is not installed; evosdpa needs it to build" >&2
  exit 1
fi
# cudnn_frontend headers (header-only, from PyPI) for evosdpa-bench's direct cuDNN SDPA peer. Optional:
# without them the benchmark is built without that peer.
fe_version=1.16.0
if [ ! -f .deps/cudnn_frontend/include/cudnn_frontend.h ]; then
  tmp=$(mktemp -d)
  if python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
       "nvidia-cudnn-frontend==$fe_version" -d "$tmp" 2>/dev/null; then
    mkdir -p .deps/cudnn_frontend && (cd .deps/cudnn_frontend && unzip -q -o "$tmp"/*.whl 'include/*')
  else
    echo "note: could not fetch nvidia-cudnn-frontend==$fe_version; evosdpa-bench will have no cuDNN peer"
  fi
  rm -rf "$tmp"
fi
