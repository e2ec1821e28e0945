// The instantiations of the FP8 kernel, each compiled in its own file under inst/ (per output type and
// head_dim).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/kernel_params.hpp"
#include "kernels/mma_fp8/mma_fp8_config.hpp"

namespace evosdpa::detail::mma_fp8 {

// TO: O's element type; kIndex: a row of kConfigs.
template <typename TO, int kIndex>
cudaError_t launch(const KernelParams& p, cudaStream_t stream);

// Instantiated for (__half, config_index(64)) only (inst/mma_fp8_fp16_d64.cu): the image probe.
template <typename TO, int kIndex>
cudaError_t kernel_attributes(cudaFuncAttributes* attr);

}  // namespace evosdpa::detail::mma_fp8
