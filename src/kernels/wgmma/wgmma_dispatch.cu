// Chooses the (dtype, tile-table row) instantiation of the Hopper kernel and hands it the split count.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/dtype_dispatch.cuh"
#include "kernels/wgmma/wgmma_dispatch.hpp"
#include "kernels/wgmma/wgmma_instances.hpp"

namespace evosdpa::detail::wgmma_sm90 {

cudaError_t launch_variant(const KernelParams& p, evosdpa_dtype_t dtype, int variant, cudaStream_t stream) {
  const Choice choice = Choice::of_variant(variant);
  // Each row is instantiated for the inputs it takes: E4M3 for the FP8 rows, fp16 and bf16 for the others.
  if (dtype == EVOSDPA_DTYPE_FLOAT8_E4M3)
    return with_row<kConfigCount>(choice.row, [&](auto row) -> cudaError_t {
      if constexpr (kConfigs[row()].fp8) return launch<__nv_fp8_e4m3, row()>(p, choice.splits, stream);
      else return cudaErrorInvalidValue;
    });
  return with_element_type(dtype, [&](auto t) {
    return with_row<kConfigCount>(choice.row, [&](auto row) -> cudaError_t {
      if constexpr (!kConfigs[row()].fp8) return launch<decltype(t), row()>(p, choice.splits, stream);
      else return cudaErrorInvalidValue;
    });
  });
}

cudaError_t probe_image() {
  cudaFuncAttributes attr;
  return probe_answer(kernel_attributes<__half, row_of(64, 3)>(&attr));
}

}  // namespace evosdpa::detail::wgmma_sm90
