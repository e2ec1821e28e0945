// The arguments every backward kernel receives: the forward's KernelParams (q, k, v, o, lse now read),
// the gradients, and the workspace, built on the host by make_backward_params (dispatch.cpp).
#pragma once

#include "kernels/rtc_std.hpp"

#include "kernels/kernel_params.hpp"

namespace evosdpa::detail {

struct BackwardParams {
  KernelParams fwd;  // lse is the forward's, read; causal rows with no key have lse = -inf
  const void* dout;
  void* dq;
  void* dk;
  void* dv;
  // Strides in elements; head_dim is contiguous.
  int64_t dout_batch_stride, dout_head_stride, dout_seq_stride;
  int64_t dq_batch_stride, dq_head_stride, dq_seq_stride;
  int64_t dk_batch_stride, dk_head_stride, dk_seq_stride;
  int64_t dv_batch_stride, dv_head_stride, dv_seq_stride;
  // At least the family's workspace_bytes(), kWorkspaceAlignment-aligned; laid out by the family.
  void* workspace;
  int heads_kv;
  bool fast;  // EVOSDPA_BACKWARD_FAST: dQ may be summed with atomics
};

}  // namespace evosdpa::detail
