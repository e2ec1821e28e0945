# Sources of the library (one list, read by the top-level CMakeLists.txt).
set(EVOSDPA_SOURCES
  src/api.cpp
  src/accuracy.cpp
  src/validation.cpp
  src/selection.cpp
  src/dispatch.cpp
  src/kernels/registry.cpp
  src/kernels/cuda_archs.cpp
  src/kernels/reference/reference.cu
  src/kernels/mma/mma_family.cpp
  src/kernels/mma/mma_dispatch.cu
  src/kernels/mma/inst/mma_fp16_d64.cu
  src/kernels/mma/inst/mma_fp16_d128.cu
  src/kernels/mma/inst/mma_bf16_d64.cu
  src/kernels/mma/inst/mma_bf16_d128.cu
)

# Each kernel family's CUDA targets, compiled into the file that defines its KernelFamily
# (EVOSDPA_CUDA_ARCHS) so that selection refuses a device the build has no code for. Both families
# build with CMAKE_CUDA_ARCHITECTURES; one restricted to other targets (e.g. CUDA_ARCHITECTURES 90a on
# its .cu files) passes that list instead. ';' separates CMake list items, so it is passed as ','.
string(REPLACE ";" "," EVOSDPA_CUDA_ARCHS_ALL "${CMAKE_CUDA_ARCHITECTURES}")
set_source_files_properties(
  ${CMAKE_CURRENT_LIST_DIR}/kernels/mma/mma_family.cpp ${CMAKE_CURRENT_LIST_DIR}/kernels/reference/reference.cu
  PROPERTIES COMPILE_DEFINITIONS "EVOSDPA_CUDA_ARCHS=\"${EVOSDPA_CUDA_ARCHS_ALL}\"")
