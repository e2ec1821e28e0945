#!/usr/bin/env bash
# The C++ package, end to end, as a user sees it (no GPU needed):
#   install  `cmake --install BUILD_DIR --prefix TMP`, the prefix then moved (relocatable), then build
#            tests/package/consumer against it with find_package(evosdpa 0.9 REQUIRED) (a C and C++
#            project, no CUDA language), link and run the consumers (C++ and C, each against the static
#            and the shared library);
#   subdir   build the same consumer with add_subdirectory(SOURCE_DIR) and CMAKE_CUDA_ARCHITECTURES=90,
#            which compiles the library itself (only the library: the consumer builds nothing else).
# Usage: tests/package/run.sh SOURCE_DIR BUILD_DIR [install|subdir|all]   (default: all)
# BUILD_DIR is a configured and built evosdpa build (CTest passes its own). Work goes to a temporary
# folder, removed at the end unless EVOSDPA_KEEP_PACKAGE_TEST is set.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 SOURCE_DIR BUILD_DIR [install|subdir|all]" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
mode=${3:-all}
command -v nvcc >/dev/null 2>&1 || export PATH="/usr/local/cuda/bin:$PATH"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/evosdpa-package.XXXXXX")
if [ -z "${EVOSDPA_KEEP_PACKAGE_TEST:-}" ]; then
  trap 'rm -rf "$tmp"' EXIT
else
  echo "keeping $tmp"
fi

run_consumers() {  # BUILD_DIR: run the consumers (C++ and C, static and shared), show their output
  for exe in consumer_static consumer_shared consumer_c_static consumer_c; do
    echo "--- $exe"
    "$1/$exe"
  done
}

if [ "$mode" = install ] || [ "$mode" = all ]; then
  echo "=== install: cmake --install, the prefix moved to $tmp/prefix, then find_package(evosdpa 0.9)"
  # Installed elsewhere and then moved: the package must be relocatable (nothing of the install prefix
  # written into it), as an unpacked archive or a package manager's staging directory needs.
  cmake --install "$build" --prefix "$tmp/staging" >"$tmp/install.log"
  mv "$tmp/staging" "$tmp/prefix"
  for f in include/evosdpa/evosdpa.h include/evosdpa/evosdpa.hpp; do
    [ -f "$tmp/prefix/$f" ] || { echo "missing from the install: $f" >&2; exit 1; }
  done
  cfg=$(find "$tmp/prefix" -name evosdpaConfig.cmake -print -quit)
  [ -n "$cfg" ] || { echo "missing from the install: evosdpaConfig.cmake" >&2; exit 1; }
  echo "installed: $(cd "$tmp/prefix" && find . -type f | sort | tr '\n' ' ')"
  cmake -S "$src/tests/package/consumer" -B "$tmp/consumer-install" "${generator[@]}" \
        -DEVOSDPA_CONSUMER_MODE=package -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release \
        >"$tmp/consumer-install.log" || { cat "$tmp/consumer-install.log"; exit 1; }
  grep 'evosdpa .* from' "$tmp/consumer-install.log" || true
  cmake --build "$tmp/consumer-install" >>"$tmp/consumer-install.log" 2>&1 ||
    { cat "$tmp/consumer-install.log"; exit 1; }
  # The shared library must come from the prefix (its RUNPATH), not from the build tree.
  if command -v ldd >/dev/null 2>&1; then
    libs=$(ldd "$tmp/consumer-install/consumer_shared")
    case $libs in
      *"$tmp/prefix/"*libevosdpa.so*) ;;
      *) echo "consumer_shared does not load libevosdpa.so from the prefix:" >&2; echo "$libs" >&2; exit 1 ;;
    esac
  fi
  run_consumers "$tmp/consumer-install"
  # 0.x: another minor version is not compatible (evosdpaConfigVersion.cmake, SameMinorVersion).
  mkdir -p "$tmp/wrong-version"
  printf 'cmake_minimum_required(VERSION 3.25)\nproject(v LANGUAGES NONE)\nfind_package(evosdpa 0.10 REQUIRED)\n' \
    >"$tmp/wrong-version/CMakeLists.txt"
  if cmake -S "$tmp/wrong-version" -B "$tmp/wrong-version/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
       >"$tmp/wrong-version.log" 2>&1; then
    echo "find_package(evosdpa 0.10) accepted the installed 0.9 package" >&2
    exit 1
  fi
  # Refused for its version, not for anything else (a package that fails to load fails this too).
  grep -q "evosdpaConfig.cmake, version: 0.9.0" "$tmp/wrong-version.log" ||
    { cat "$tmp/wrong-version.log" >&2; echo "find_package(evosdpa 0.10) failed, but not on the version" >&2; exit 1; }
  echo "ok: find_package(evosdpa 0.10) refuses the 0.9 package"
fi

if [ "$mode" = subdir ] || [ "$mode" = all ]; then
  echo "=== subdir: add_subdirectory($src) with CMAKE_CUDA_ARCHITECTURES=90"
  start=$(date +%s)
  cmake -S "$src/tests/package/consumer" -B "$tmp/consumer-subdir" "${generator[@]}" \
        -DEVOSDPA_CONSUMER_MODE=subdirectory -DEVOSDPA_SOURCE_DIR="$src" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_ARCHITECTURES=90 -DEVOSDPA_EXPECT_CUDA_ARCHITECTURES=90 \
        >"$tmp/consumer-subdir.log" || { cat "$tmp/consumer-subdir.log"; exit 1; }
  grep 'evosdpa as a subproject' "$tmp/consumer-subdir.log" || true
  cmake --build "$tmp/consumer-subdir" >>"$tmp/consumer-subdir.log" 2>&1 ||
    { cat "$tmp/consumer-subdir.log"; exit 1; }
  echo "configure + build: $(($(date +%s) - start)) s"
  run_consumers "$tmp/consumer-subdir"
fi
echo "PACKAGE TEST: PASS"
