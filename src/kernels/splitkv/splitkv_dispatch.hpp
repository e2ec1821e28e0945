// The split-KV family's entry points compiled by nvcc (splitkv_dispatch.cu), for its KernelFamily
// (splitkv_family.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include "evosdpa/evosdpa.h"
#include "kernels/kernel_params.hpp"

namespace evosdpa::detail::splitkv {

// The kernel (and merge) of row `variant` of kConfigs; p.num_splits and p.workspace as supports() chose.
cudaError_t launch_variant(const KernelParams& p, evosdpa_dtype_t dtype, int variant, cudaStream_t stream);

// Instantiated in inst/, one (dtype, row) per file.
template <typename T, int kIndex>
cudaError_t launch(const KernelParams& p, cudaStream_t stream);
template <typename T, int kIndex>
cudaError_t kernel_attributes(cudaFuncAttributes* attr);

// KernelFamily::probe_image.
cudaError_t probe_image();

}  // namespace evosdpa::detail::splitkv
