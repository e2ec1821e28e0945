// The instantiations of the Hopper kernel, each compiled in its own file under inst/ (sm_90a only).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/kernel_params.hpp"
#include "kernels/wgmma/wgmma_config.hpp"

namespace evosdpa::detail::wgmma_sm90 {

// kIndex: a row of kConfigs (wgmma_config.hpp); splits: CTAs per item (Choice, wgmma_config.hpp).
template <typename T, int kIndex>
cudaError_t launch(const KernelParams& p, int splits, cudaStream_t stream);

template <typename T, int kIndex>
cudaError_t kernel_attributes(cudaFuncAttributes* attr);

}  // namespace evosdpa::detail::wgmma_sm90
