// The FP8 family's entry points compiled by nvcc (mma_fp8_dispatch.cu), for its KernelFamily
// (mma_fp8_family.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include "evosdpa/evosdpa.h"
#include "kernels/kernel_params.hpp"

namespace evosdpa::detail::mma_fp8 {

// dtype: the inputs' (FP8); O's type is p.o_dtype. variant: the row of kConfigs.
cudaError_t launch_variant(const KernelParams& p, evosdpa_dtype_t dtype, int variant, cudaStream_t stream);
cudaError_t probe_image();

}  // namespace evosdpa::detail::mma_fp8
