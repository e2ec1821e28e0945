#!/usr/bin/env bash
# Check, and on Debian/Ubuntu install, what building and testing evosdpa needs:
#   CMake >= 3.25, a C++17 compiler, GoogleTest, nlohmann-json >= 3.10 (found the way the build finds them:
#   a probe CMake project calls the same find_package), Python 3 whose `python3 -m venv` works (Debian's
#   python3-venv); the CUDA toolkit (nvcc 12.x/13.x) must already be installed (PATH or /usr/local/cuda).
# Installs with apt-get as root, or through `sudo -n` (never prompts). When it can do neither, or a
# requirement cannot come from apt, it names what is missing and the command that installs it, and exits 1.
# Then fetches the cudnn_frontend headers (PyPI nvidia-cudnn-frontend, header-only) into .deps/ for the
# benchmark's cuDNN peer: optional, a note if it fails.
#   scripts/install-deps.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cmake_min=3.25

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

version_ge() {  # A >= B for dotted versions
  [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]
}

cmake_version() {
  { cmake --version 2>/dev/null || true; } | sed -n 's/^cmake version \([0-9][0-9.]*\).*/\1/p'
}

have_cxx() {
  command -v "${CXX:-c++}" >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1
}

# GoogleTest and nlohmann-json as the build looks for them (tests/CMakeLists.txt, bench/CMakeLists.txt).
# Prints the names of those not found.
probe_cmake_packages() {
  mkdir -p "$tmp/probe"
  cat >"$tmp/probe/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.25)
project(evosdpa_probe LANGUAGES CXX)
find_package(GTest QUIET)
find_package(nlohmann_json 3.10 QUIET)
foreach(p IN ITEMS GTest nlohmann_json)
  if(${p}_FOUND)
    message(STATUS "probe ${p}=found")
  endif()
endforeach()
EOF
  rm -rf "$tmp/probe/build"
  local out
  if ! out=$(cmake -S "$tmp/probe" -B "$tmp/probe/build" 2>&1); then
    echo "probe-failed"
    printf '%s\n' "$out" >"$tmp/probe.log"
    return
  fi
  case $out in *"probe GTest=found"*) ;; *) echo GTest ;; esac
  case $out in *"probe nlohmann_json=found"*) ;; *) echo nlohmann_json ;; esac
}

venv_works() {
  rm -rf "$tmp/venv"
  python3 -m venv "$tmp/venv" >"$tmp/venv.log" 2>&1 && "$tmp/venv/bin/python" -m pip --version >/dev/null 2>&1
}

# ---- what is missing ------------------------------------------------------------------------------------
need_apt=()     # Debian packages to install
problems=()     # what apt cannot fix, with the way to fix it

add_pkg() { case " ${need_apt[*]-} " in *" $1 "*) ;; *) need_apt+=("$1") ;; esac; }

check_all() {
  need_apt=()
  problems=()
  local v
  v=$(cmake_version)
  if [ -z "$v" ]; then
    add_pkg cmake
  elif ! version_ge "$v" "$cmake_min"; then
    problems+=("CMake $v is too old: evosdpa needs CMake >= $cmake_min (Debian 12 has 3.25.1). Install a newer one, e.g.
    python3 -m pip install --user 'cmake>=$cmake_min'   (then put ~/.local/bin first on PATH)
  or Kitware's APT repository (https://apt.kitware.com).")
  fi
  have_cxx || add_pkg g++
  if [ -n "$v" ] && version_ge "$v" "$cmake_min" && have_cxx; then
    local m
    for m in $(probe_cmake_packages); do
      case $m in
        GTest) add_pkg libgtest-dev ;;
        nlohmann_json) add_pkg nlohmann-json3-dev ;;
        probe-failed) problems+=("a test CMake project (C++) does not configure; its output:
$(sed 's/^/    /' "$tmp/probe.log")") ;;
      esac
    done
  fi
  if ! command -v python3 >/dev/null 2>&1; then
    add_pkg python3
    add_pkg python3-venv
  elif ! venv_works; then
    add_pkg python3-venv
  fi
}

check_all

# ---- install with apt-get, as root or through sudo -n ------------------------------------------------------
if [ ${#need_apt[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: missing ${need_apt[*]} (Debian package names) and this is not a Debian/Ubuntu system" \
         "(no apt-get): install the equivalents with your package manager" >&2
    exit 1
  fi
  if [ "$(id -u)" -eq 0 ]; then
    sudo=()
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
  else
    echo "error: missing ${need_apt[*]}; installing them needs root, and sudo is not available without" \
         "a password. Install them with:" >&2
    echo "    sudo apt-get update && sudo apt-get install -y ${need_apt[*]}" >&2
    exit 1
  fi
  echo "installing: ${need_apt[*]}"
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
  hash -r
  check_all
  if [ ${#need_apt[@]} -gt 0 ]; then
    problems+=("still missing after apt-get install: ${need_apt[*]}")
  fi
fi

if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  problems+=("the CUDA toolkit (nvcc 12.x or 13.x) is not installed (neither on PATH nor in /usr/local/cuda);
    see https://developer.nvidia.com/cuda-downloads (Debian: the cuda-toolkit package from NVIDIA's repository)")
fi

if [ ${#problems[@]} -gt 0 ]; then
  for p in "${problems[@]}"; do echo "error: $p" >&2; done
  exit 1
fi

# ---- cudnn_frontend headers (optional) -------------------------------------------------------------------
# Header-only, from PyPI, for evosdpa-bench's direct cuDNN SDPA peer; without them the benchmark is built
# without that peer. Fetched with the pip of the virtual environment made above (no system pip needed) and
# unpacked with Python's zipfile.
fe_version=1.16.0
if [ ! -f .deps/cudnn_frontend/include/cudnn_frontend.h ]; then
  [ -x "$tmp/venv/bin/python" ] || venv_works || true
  if [ -x "$tmp/venv/bin/python" ] &&
     "$tmp/venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
       --python-version 3.11 "nvidia-cudnn-frontend==$fe_version" -d "$tmp/wheel" >/dev/null 2>&1; then
    mkdir -p .deps/cudnn_frontend
    python3 - "$tmp"/wheel/*.whl .deps/cudnn_frontend <<'EOF'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    headers = [n for n in z.namelist() if n.startswith("include/") and not n.endswith("/")]
    z.extractall(dest, members=headers)
print(f"cudnn_frontend: {len(headers)} headers from {wheel.rsplit('/', 1)[-1]} into {dest}/include")
EOF
  else
    echo "note: could not fetch nvidia-cudnn-frontend==$fe_version; evosdpa-bench will have no cuDNN peer"
  fi
fi
