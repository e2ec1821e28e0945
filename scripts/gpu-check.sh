#!/usr/bin/env bash
# On a GPU machine: run the GPU test suite, then compute-sanitizer memcheck, racecheck and synccheck on
# small shapes, and print one summary. Uses BUILD_DIR if it holds a build (e.g. one carried from a
# build machine), else configures and builds there first.
#   scripts/gpu-check.sh [BUILD_DIR]      logs go to $OUT (if set) or /tmp/evosdpa-gpu-check
set -u
cd "$(dirname "$0")/.."
build=${1:-build}
logs=${OUT:-/tmp/evosdpa-gpu-check}
mkdir -p "$logs"
if [ ! -x "$build/tests/evosdpa_gpu_tests" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >"$logs/configure.log" 2>&1 &&
    cmake --build "$build" -j"$(nproc)" >"$logs/build.log" 2>&1 || { echo "build failed: $logs/build.log"; exit 1; }
fi
tests="$build/tests/evosdpa_gpu_tests"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>/dev/null

# Full suite.
"$tests" --gtest_brief=1 >"$logs/gpu-tests.log" 2>&1
tests_rc=$?
grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|^GPU:' "$logs/gpu-tests.log" | tail -n 5
grep -E '^\[  FAILED  \]' "$logs/gpu-tests.log" | head -n 20

# Sanitizers on small shapes: every kernel, tails, both causal alignments, strided output, Lk = 0.
small='All/KernelVsCpu.*odd_fp16_b1h2x2_q129k129_d64_topleft*:All/KernelVsCpu.*odd_bf16_b1h2x2_q17k17_d128_full*'
small+=':All/KernelVsCpu.*lqlk_fp16_b1h2x2_q100k300_d128_bottomright*:All/KernelVsCpu.*lqlk_bf16_b1h2x2_q300k100_d64_bottomright*'
small+=':All/KernelVsCpu.*layout_fp16_b2h4x4_q333k271_d64_full_padded*:DeviceApi.EmptyKeys*:DeviceApi.RunsOnAStream*'
# Few items with many keys: wgmma_sm90 takes split_keys here (the consumers merge in shared memory);
# the cluster split, with its empty splits, runs on the WgmmaRow cases below (_x2).
small+=':All/KernelVsCpu.*lqlk_fp16_b1h2x2_q64k1000_d128_bottomright*:All/KernelVsCpu.*lqlk_bf16_b1h2x2_q64k1000_d64_topleft*'
# FP8 inputs (the reference and mma_fp8_sm89): a causal tail, and Lq > Lk bottom-right with per-head descales.
small+=':All/KernelVsCpu.*odd_fp8_b1h2x2_q129k129_d64_topleft*:All/KernelVsCpu.*lqlk_fp8_b1h2x2_q300k100_d64_bottomright*'
# wgmma_sm90's FP8 row (V transposed in shared memory): a causal tail, and a padded bottom-right case.
small+=':All/KernelVsCpu.*wgmma_sm90_odd_fp8_b1h2x2_q129k129_d128_topleft*'
small+=':All/KernelVsCpu.*wgmma_sm90_layout_fp8_b2h4x4_q333k271_d128_bottomright_padded*'
# The E4M3 row at D = 64 (64-byte rows, 64B swizzle).
small+=':All/KernelVsCpu.*wgmma_sm90_lqlk_fp8_b1h2x2_q300k100_d64_bottomright*'
# Every wgmma_sm90 row forced on two small shapes (by name these take the split_keys row).
small+=':Rows/WgmmaRow.*odd_fp16_b1h2x2_q129k129_d64_topleft_bhsd_m*:Rows/WgmmaRow.*lqlk_bf16_b1h2x2_q300k100_d128_bottomright_bhsd_m*'
# The backward of mma_sm80 and the reference, both modes: a causal tail with grouped heads, Lq > Lk
# bottom-right (rows with no key), a padded layout, and Lq = 0 / Lk = 0.
small+=':All/BackwardVsCpu.*odd_fp16_b1h2x2_q129k129_d64_topleft*:All/BackwardVsCpu.*lqlk_bf16_b1h2x2_q300k100_d128_bottomright*'
small+=':All/BackwardVsCpu.*gqa_fp16*d128*:All/BackwardVsCpu.*layout_bf16_b2h4x4_q333k271_d64_full_padded*:All/BackwardEdges.*'
# KV caches (splitkv_sm80 and the reference): paged with odd pages and rows past a group, a page index out of
# range, per-sequence lengths 0 and 1 with fixed splits (the merge), and 128 packed rows over 2 splits.
small+=':All/KvCache.*paged48_odd_tl*:All/KvCache.*invalid_page_splitkv*:All/KvCache.*seqused_0_1_77_1000_br_splitkv*'
small+=':All/KvCache.*rows128_splits2_splitkv*:All/KernelVsCpu.*splitkv_sm80_odd_fp16_b1h2x2_q129k129_d64_topleft*'
# Packed batches on wgmma_sm90 and mma_sm80: lengths 0, 1, odd and long (the copied last blocks, empty
# items), queries and keys of other lengths, the head-major layout, and offsets out of range (clamped);
# wgmma_sm90's work counter (the *_counter cases: claimed items, CTAs whose first claim finds none).
small+=':All/Varlen.*mixed_bf16_d64_br_wgmma*:All/Varlen.*q_ne_k_br_mma*:All/Varlen.*head_major_packed_wgmma*'
small+=':All/Varlen.*seqused_with_cu_k_wgmma*:VarlenOffsets.*:All/Varlen.*long_and_short_idle_ctas_wgmma_sm90_counter*'
small+=':All/Varlen.*padded_seqused_wide_wgmma_sm90_counter*'
declare -A san_rc san_errors
for tool in memcheck racecheck synccheck; do
  compute-sanitizer --tool "$tool" --error-exitcode 99 "$tests" --gtest_filter="$small" --gtest_brief=1 \
    >"$logs/sanitizer-$tool.log" 2>&1
  san_rc[$tool]=$?
  # memcheck/synccheck end with "ERROR SUMMARY: N errors", racecheck with "... (N errors, M warnings)".
  san_errors[$tool]=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/sanitizer-$tool.log" | tail -n 1 |
    grep -oE '[0-9]+ errors?' | grep -oE '[0-9]+')
done

passed=$(grep -cE '^\[       OK \]' "$logs/gpu-tests.log")
failed=$(grep -cE '^\[  FAILED  \] [A-Za-z]' "$logs/gpu-tests.log" | head -n 1)
summary_line=$(grep -E '^\[  PASSED  \]' "$logs/gpu-tests.log" | tail -n 1)
echo
echo "== evosdpa GPU check =="
echo "gpu tests:  ${summary_line:-see $logs/gpu-tests.log} (exit $tests_rc)"
status=0
[ "$tests_rc" -eq 0 ] || status=1
for tool in memcheck racecheck synccheck; do
  echo "$tool: ${san_errors[$tool]:-?} errors (exit ${san_rc[$tool]})"
  [ "${san_rc[$tool]}" -eq 0 ] && [ "${san_errors[$tool]:-1}" -eq 0 ] || status=1
done
echo "logs: $logs"
[ "$status" -eq 0 ] && echo "GPU CHECK: PASS" || echo "GPU CHECK: FAIL"
exit $status
