// The instantiations of the sm_80 tensor-core kernel, each compiled in its own file under inst/.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "kernels/kernel_params.hpp"
#include "kernels/mma/mma_config.hpp"

namespace evosdpa::detail::mma_sm80 {

// kIndex: a row of kConfigs (mma_config.hpp). Instantiated for every row in inst/.
template <typename T, int kIndex>
cudaError_t launch(const KernelParams& p, cudaStream_t stream);

// Instantiated for one row only (fp16, config_index(64, false), in inst/mma_fp16_d64.cu): every row is
// compiled for the same targets, so one kernel answers the image probe for all.
template <typename T, int kIndex>
cudaError_t kernel_attributes(cudaFuncAttributes* attr);

}  // namespace evosdpa::detail::mma_sm80
