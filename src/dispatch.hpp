// Runs the selected kernel family: converts the public parameters to KernelParams and calls the family's
// launch.
#pragma once

#include <cuda_runtime_api.h>

#include "evosdpa/evosdpa.h"
#include "kernels/backward_params.hpp"
#include "kernels/kernel_params.hpp"
#include "selection.hpp"

namespace evosdpa::detail {

// The scale the kernels use: softmax_scale, or 1/sqrt(head_dim) when it is NaN (the default).
float effective_scale(const evosdpa_params_t& p);

KernelParams make_kernel_params(const evosdpa_params_t& p);

// `chosen`: a successful select_kernel() for `p`.
cudaError_t run_kernel(const Selection& chosen, const evosdpa_params_t& p, cudaStream_t stream);

BackwardParams make_backward_params(const evosdpa_params_t& p);

// `chosen`: a successful select_kernel(..., Pass::kBackward) for `p`, whose workspace was checked.
cudaError_t run_backward(const Selection& chosen, const evosdpa_params_t& p, cudaStream_t stream);

}  // namespace evosdpa::detail
