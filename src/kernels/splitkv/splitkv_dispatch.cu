// Chooses the (dtype, row) instantiation of the split-KV kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/dtype_dispatch.cuh"
#include "kernels/splitkv/splitkv_config.hpp"
#include "kernels/splitkv/splitkv_dispatch.hpp"

namespace evosdpa::detail::splitkv {

extern template cudaError_t launch<__half, kRowD64>(const KernelParams&, cudaStream_t);
extern template cudaError_t launch<__half, kRowD128Wide>(const KernelParams&, cudaStream_t);
extern template cudaError_t launch<__half, kRowD128>(const KernelParams&, cudaStream_t);
extern template cudaError_t launch<__half, kRowD128Short>(const KernelParams&, cudaStream_t);
extern template cudaError_t launch<__nv_bfloat16, kRowD64>(const KernelParams&, cudaStream_t);
extern template cudaError_t launch<__nv_bfloat16, kRowD128Wide>(const KernelParams&, cudaStream_t);
extern template cudaError_t launch<__nv_bfloat16, kRowD128>(const KernelParams&, cudaStream_t);
extern template cudaError_t launch<__nv_bfloat16, kRowD128Short>(const KernelParams&, cudaStream_t);
extern template cudaError_t kernel_attributes<__half, kRowD64>(cudaFuncAttributes*);

cudaError_t launch_variant(const KernelParams& p, evosdpa_dtype_t dtype, int variant, cudaStream_t stream) {
  return with_element_type(dtype, [&](auto t) {
    return with_row<kConfigCount>(variant, [&](auto row) { return launch<decltype(t), row()>(p, stream); });
  });
}

cudaError_t probe_image() {
  cudaFuncAttributes attr;
  return probe_answer(kernel_attributes<__half, kRowD64>(&attr));
}

}  // namespace evosdpa::detail::splitkv
