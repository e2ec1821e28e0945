// Runs one attention backward problem on the GPU from host tensors, in a chosen memory layout (dq with q's
// strides, dk and dv with k's and v's), with the workspace the library asks for; dq, dk, dv and the
// workspace are poisoned (all bits set: NaN in fp16, bf16 and fp32) before each run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/gpu_harness.hpp"
#include "host/backward_check.hpp"

namespace gpu_test {

// The float64 expectations of a 16-bit case of the shape set (dQ on its row_step rows, dK and dV on its
// row_step keys), computed once and shared by every kernel and mode tested on it.
const evosdpa::host::BackwardExpected& backward_expected_for(const test_cases::KCase& c);

class DeviceBackwardProblem {
 public:
  // Uploads `in` (q, k, v, o, dO in `layout`; lse as contiguous float32) and allocates the workspace
  // evosdpa_backward_workspace_size() gives for `kernel` and `mode` (workspace_query() says whether it
  // answered).
  DeviceBackwardProblem(const evosdpa::host::Shape& s, evosdpa_dtype_t dtype, Layout layout,
                        const evosdpa::host::BackwardInputs& in, evosdpa_backward_mode_t mode,
                        const std::string& kernel);
  DeviceBackwardProblem(const DeviceBackwardProblem&) = delete;
  DeviceBackwardProblem& operator=(const DeviceBackwardProblem&) = delete;

  const evosdpa::Result& workspace_query() const { return workspace_query_; }
  size_t workspace_bytes() const { return params_.workspace_size; }
  evosdpa_params_t params() const { return params_; }
  void poison();                                         // fill dq, dk, dv and the workspace with NaN bits, and wait
  evosdpa::Result run(const std::string& kernel) const;  // the backward on the legacy default stream
  evosdpa::host::Gradients gradients() const;            // dq, dk, dv as BHSD floats
  // Raw bits of the whole allocation of a gradient, padding included (for bitwise and untouched-padding
  // checks).
  std::vector<uint16_t> raw(evosdpa::host::Grad g) const;

 private:
  const DeviceBuffer& buffer(evosdpa::host::Grad g) const;

  evosdpa::host::Shape shape_;
  evosdpa_dtype_t dtype_;
  Layout layout_;
  DeviceBuffer q_, k_, v_, o_, dout_, lse_, dq_, dk_, dv_;
  std::unique_ptr<DeviceBuffer> workspace_;  // sized once the params are complete
  evosdpa::Result workspace_query_;
  evosdpa_params_t params_;
};

// Whether every element of a gradient's allocation outside the tensor still holds the poison (nothing
// was written past a row or a head); "" when so, else which element was written.
std::string padding_written(const std::vector<uint16_t>& raw, Layout layout, int64_t batch, int64_t heads,
                            int64_t seqlen, int64_t head_dim);

}  // namespace gpu_test
