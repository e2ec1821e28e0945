// evosdpa C++ API: a thin layer over the C ABI in evosdpa.h with strings and a result type.
#ifndef EVOSDPA_EVOSDPA_HPP
#define EVOSDPA_EVOSDPA_HPP

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "evosdpa/evosdpa.h"

namespace evosdpa {

using Params = evosdpa_params_t;
using Status = evosdpa_status_t;
using DType = evosdpa_dtype_t;
using Causal = evosdpa_causal_t;

// Outcome of a call: the status and, on failure, the reason.
struct Result {
  Status status = EVOSDPA_SUCCESS;
  std::string message;
  // supports(): the kernel that would run (empty when none would).
  std::string kernel;
  bool ok() const { return status == EVOSDPA_SUCCESS; }
};

// Sizes and contiguous strides for a [batch, heads, seq, head_dim] problem in the given layout.
enum class Layout { BHSD, BSHD };
Params make_params(const void* q, const void* k, const void* v, void* o, DType dtype, int64_t batch,
                   int64_t heads, int64_t seqlen_q, int64_t seqlen_k, int64_t head_dim,
                   Causal causal = EVOSDPA_CAUSAL_NONE, Layout layout = Layout::BHSD);

// Attention forward on `stream`; `kernel` is "auto" or a name from kernel_names().
Result attention_forward(const Params& params, cudaStream_t stream = nullptr,
                         const std::string& kernel = "auto");

// Whether attention_forward would accept these arguments; Result::kernel names the kernel it would run.
Result supports(const Params& params, const std::string& kernel = "auto");

// The backward pass (evosdpa_attention_backward): dq, dk, dv from q, k, v, o, lse and dout in `params`.
Result attention_backward(const Params& params, cudaStream_t stream = nullptr, const std::string& kernel = "auto");

// Bytes of workspace attention_forward would use for its key splits or work counter
// (evosdpa_forward_workspace_size);
// `bytes` is set on success.
Result forward_workspace_size(const Params& params, size_t& bytes, const std::string& kernel = "auto");

// Bytes of workspace attention_backward needs (evosdpa_backward_workspace_size); `bytes` is set on success.
Result backward_workspace_size(const Params& params, size_t& bytes, const std::string& kernel = "auto");

// Whether attention_backward would accept these arguments; Result::kernel names the kernel it would run.
Result supports_backward(const Params& params, const std::string& kernel = "auto");

// Kernel names, fastest first.
std::vector<std::string> kernel_names();

}  // namespace evosdpa

#endif  // EVOSDPA_EVOSDPA_HPP
