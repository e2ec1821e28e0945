// mma_sm80's backward entry points compiled by nvcc (bwd_dispatch.cu), for its BackwardEntry (mma_family.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include "evosdpa/evosdpa.h"
#include "kernels/backward_params.hpp"

namespace evosdpa::detail::mma_sm80 {

// Instantiated per (dtype, config row) in inst/.
template <typename T, int kIndex>
cudaError_t launch_backward(const BackwardParams& bp, cudaStream_t stream);

// `variant`: the row of kBwdConfigs that the backward supports() chose.
cudaError_t launch_backward_variant(const BackwardParams& bp, evosdpa_dtype_t dtype, int variant, cudaStream_t stream);

}  // namespace evosdpa::detail::mma_sm80
