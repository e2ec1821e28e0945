# Sources of the library (one list, read by the top-level CMakeLists.txt).
set(EVOSDPA_SOURCES
  src/api.cpp
  src/accuracy.cpp
  src/validation.cpp
  src/validation_backward.cpp
  src/validation_kvcache.cpp
  src/validation_mods.cpp
  src/validation_varlen.cpp
  src/selection.cpp
  src/dispatch.cpp
  src/kernels/registry.cpp
  src/kernels/cuda_archs.cpp
  src/kernels/reference/reference.cu
  src/kernels/reference/reference_backward.cu
  src/kernels/mma/mma_family.cpp
  src/kernels/mma/mma_dispatch.cu
  src/kernels/mma/inst/mma_fp16_d64.cu
  src/kernels/mma/inst/mma_fp16_d128.cu
  src/kernels/mma/inst/mma_bf16_d64.cu
  src/kernels/mma/inst/mma_bf16_d128.cu
  src/kernels/mma/bwd/bwd_dispatch.cu
  src/kernels/mma/bwd/inst/mma_bwd_fp16_row0.cu
  src/kernels/mma/bwd/inst/mma_bwd_fp16_row1.cu
  src/kernels/mma/bwd/inst/mma_bwd_fp16_row2.cu
  src/kernels/mma/bwd/inst/mma_bwd_fp16_row3.cu
  src/kernels/mma/bwd/inst/mma_bwd_bf16_row0.cu
  src/kernels/mma/bwd/inst/mma_bwd_bf16_row1.cu
  src/kernels/mma/bwd/inst/mma_bwd_bf16_row2.cu
  src/kernels/mma/bwd/inst/mma_bwd_bf16_row3.cu
  src/kernels/wgmma/wgmma_family.cpp
  src/kernels/wgmma/tma_map.cpp
  src/kernels/mma_fp8/mma_fp8_family.cpp
  src/kernels/splitkv/splitkv_family.cpp
  src/kernels/splitkv/splitkv_dispatch.cu
  src/kernels/splitkv/inst/splitkv_fp16_d64.cu
  src/kernels/splitkv/inst/splitkv_fp16_d128.cu
  src/kernels/splitkv/inst/splitkv_bf16_d64.cu
  src/kernels/splitkv/inst/splitkv_bf16_d128.cu
  src/kernels/mma_fp8/mma_fp8_dispatch.cu
  src/kernels/mma_fp8/inst/mma_fp8_fp16_d64.cu
  src/kernels/mma_fp8/inst/mma_fp8_fp16_d128.cu
  src/kernels/mma_fp8/inst/mma_fp8_bf16_d64.cu
  src/kernels/mma_fp8/inst/mma_fp8_bf16_d128.cu
)

# The Hopper family's kernels: compiled for sm_90a only (wgmma, setmaxnreg), whatever
# CMAKE_CUDA_ARCHITECTURES says; their host-side family (above) is ordinary C++. Also the split-KV
# rows that need sm_90's shared memory or were measured only there.
set(EVOSDPA_SM90A_SOURCES
  src/kernels/wgmma/wgmma_dispatch.cu
  src/kernels/wgmma/inst/wgmma_fp16_d64.cu
  src/kernels/wgmma/inst/wgmma_fp16_d64_m128.cu
  src/kernels/wgmma/inst/wgmma_fp16_d128.cu
  src/kernels/wgmma/inst/wgmma_bf16_d64.cu
  src/kernels/wgmma/inst/wgmma_bf16_d64_m128.cu
  src/kernels/wgmma/inst/wgmma_bf16_d128.cu
  src/kernels/wgmma/inst/wgmma_fp16_d64_splitkeys.cu
  src/kernels/wgmma/inst/wgmma_fp16_d128_splitkeys.cu
  src/kernels/wgmma/inst/wgmma_bf16_d64_splitkeys.cu
  src/kernels/wgmma/inst/wgmma_bf16_d128_splitkeys.cu
  src/kernels/wgmma/inst/wgmma_fp16_tuned.cu
  src/kernels/wgmma/inst/wgmma_bf16_tuned.cu
  src/kernels/wgmma/inst/wgmma_fp8_d128.cu
  src/kernels/wgmma/inst/wgmma_fp8_d128_m192.cu
  src/kernels/wgmma/inst/wgmma_fp8_d64.cu
  src/kernels/wgmma/inst/wgmma_fp8_d64_m192.cu
  src/kernels/wgmma/bwd/wgmma_bwd_dispatch.cu
  src/kernels/wgmma/bwd/inst/wgmma_bwd_fp16_d64.cu
  src/kernels/wgmma/bwd/inst/wgmma_bwd_fp16_d128.cu
  src/kernels/wgmma/bwd/inst/wgmma_bwd_bf16_d64.cu
  src/kernels/wgmma/bwd/inst/wgmma_bwd_bf16_d128.cu
  # splitkv_sm80's 192 KiB row (splitkv_config.hpp): only sm_90's shared memory holds it; and its 48 KiB
  # row, four blocks per SM for short caches and paged caches of few sequences, measured only there.
  src/kernels/splitkv/inst/splitkv_fp16_d128_wide.cu
  src/kernels/splitkv/inst/splitkv_bf16_d128_wide.cu
  src/kernels/splitkv/inst/splitkv_fp16_d128_short.cu
  src/kernels/splitkv/inst/splitkv_bf16_d128_short.cu
)

# Each kernel family's CUDA targets, compiled into the file that defines its KernelFamily
# (EVOSDPA_CUDA_ARCHS) so that selection refuses a device the build has no code for. Both families
# build with CMAKE_CUDA_ARCHITECTURES; one restricted to other targets (e.g. CUDA_ARCHITECTURES 90a on
# its .cu files) passes that list instead. ';' separates CMake list items, so it is passed as ','.
string(REPLACE ";" "," EVOSDPA_CUDA_ARCHS_ALL "${CMAKE_CUDA_ARCHITECTURES}")
set_source_files_properties(
  ${CMAKE_CURRENT_LIST_DIR}/kernels/mma/mma_family.cpp ${CMAKE_CURRENT_LIST_DIR}/kernels/reference/reference.cu
  ${CMAKE_CURRENT_LIST_DIR}/kernels/mma_fp8/mma_fp8_family.cpp ${CMAKE_CURRENT_LIST_DIR}/kernels/splitkv/splitkv_family.cpp
  PROPERTIES COMPILE_DEFINITIONS "EVOSDPA_CUDA_ARCHS=\"${EVOSDPA_CUDA_ARCHS_ALL}\"")
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/kernels/wgmma/wgmma_family.cpp
  PROPERTIES COMPILE_DEFINITIONS "EVOSDPA_CUDA_ARCHS=\"90a\"")
