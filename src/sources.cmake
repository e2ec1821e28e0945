# Sources of the library (one list, read by the top-level CMakeLists.txt).
set(EVOSDPA_SOURCES
  src/api.cpp
  src/accuracy.cpp
  src/validation.cpp
  src/selection.cpp
  src/dispatch.cpp
  src/kernels/reference/reference.cu
  src/kernels/mma/mma_dispatch.cu
  src/kernels/mma/inst/mma_fp16_d64.cu
  src/kernels/mma/inst/mma_fp16_d128.cu
  src/kernels/mma/inst/mma_bf16_d64.cu
  src/kernels/mma/inst/mma_bf16_d128.cu
)
