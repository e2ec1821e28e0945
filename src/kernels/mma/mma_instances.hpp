// The instantiations of the sm_80 tensor-core kernel, each compiled in its own file under inst/.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "kernels/kernel_params.hpp"

namespace evosdpa::detail::mma_sm80 {

template <typename T, int D>
cudaError_t launch(const KernelParams& p, cudaStream_t stream);

extern template cudaError_t launch<__half, 64>(const KernelParams&, cudaStream_t);
extern template cudaError_t launch<__half, 128>(const KernelParams&, cudaStream_t);
extern template cudaError_t launch<__nv_bfloat16, 64>(const KernelParams&, cudaStream_t);
extern template cudaError_t launch<__nv_bfloat16, 128>(const KernelParams&, cudaStream_t);

}  // namespace evosdpa::detail::mma_sm80
