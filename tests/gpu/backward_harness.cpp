#include "gpu/backward_harness.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>

using namespace evosdpa::host;

namespace gpu_test {
namespace {

size_t bytes_for(Layout l, int64_t B, int64_t H, int64_t L, int64_t D) {
  return 2 * static_cast<size_t>(storage_elems(l, B, H, L, D));
}

}  // namespace

const BackwardExpected& backward_expected_for(const test_cases::KCase& c) {
  static std::map<std::string, std::unique_ptr<BackwardExpected>> cache;
  auto& slot = cache[test_cases::describe(c)];
  if (!slot)
    slot = std::make_unique<BackwardExpected>(make_backward_expected(
        c.s, c.dtype, c.qk_sigma, c.row_step, case_seed(run_seed(), "backward_" + test_cases::describe(c))));
  return *slot;
}

DeviceBackwardProblem::DeviceBackwardProblem(const Shape& s, evosdpa_dtype_t dtype, Layout layout,
                                             const BackwardInputs& in, evosdpa_backward_mode_t mode,
                                             const std::string& kernel)
    : shape_(s),
      dtype_(dtype),
      layout_(layout),
      q_(bytes_for(layout, s.batch, s.heads_q, s.seqlen_q, s.head_dim)),
      k_(bytes_for(layout, s.batch, s.heads_kv, s.seqlen_k, s.head_dim)),
      v_(bytes_for(layout, s.batch, s.heads_kv, s.seqlen_k, s.head_dim)),
      o_(bytes_for(layout, s.batch, s.heads_q, s.seqlen_q, s.head_dim)),
      dout_(bytes_for(layout, s.batch, s.heads_q, s.seqlen_q, s.head_dim)),
      lse_(4 * static_cast<size_t>(s.rows()) + 4),  // never empty, so never NULL (as the forward's harness)
      dq_(bytes_for(layout, s.batch, s.heads_q, s.seqlen_q, s.head_dim)),
      dk_(bytes_for(layout, s.batch, s.heads_kv, s.seqlen_k, s.head_dim)),
      dv_(bytes_for(layout, s.batch, s.heads_kv, s.seqlen_k, s.head_dim)) {
  upload(q_, in.q, layout, s.batch, s.heads_q, s.seqlen_q, s.head_dim, dtype);
  upload(k_, in.k, layout, s.batch, s.heads_kv, s.seqlen_k, s.head_dim, dtype);
  upload(v_, in.v, layout, s.batch, s.heads_kv, s.seqlen_k, s.head_dim, dtype);
  upload(o_, in.o, layout, s.batch, s.heads_q, s.seqlen_q, s.head_dim, dtype);
  upload(dout_, in.dout, layout, s.batch, s.heads_q, s.seqlen_q, s.head_dim, dtype);
  if (!in.lse.empty() && cudaMemcpy(lse_.ptr, in.lse.data(), in.lse.size() * 4, cudaMemcpyHostToDevice) != cudaSuccess)
    throw std::runtime_error("upload failed");
  evosdpa_params_init(&params_);
  params_.q = q_.ptr;
  params_.k = k_.ptr;
  params_.v = v_.ptr;
  params_.o = o_.ptr;
  params_.lse = static_cast<float*>(lse_.ptr);
  params_.dout = dout_.ptr;
  params_.dq = dq_.ptr;
  params_.dk = dk_.ptr;
  params_.dv = dv_.ptr;
  set_shape(params_, s, dtype);
  params_.backward_mode = mode;
  const Strides sq = strides_for(layout, s.heads_q, s.seqlen_q, s.head_dim);
  const Strides sk = strides_for(layout, s.heads_kv, s.seqlen_k, s.head_dim);
  for (int64_t* t :
       {&params_.q_batch_stride, &params_.o_batch_stride, &params_.dout_batch_stride, &params_.dq_batch_stride})
    *t = sq.batch;
  for (int64_t* t :
       {&params_.q_head_stride, &params_.o_head_stride, &params_.dout_head_stride, &params_.dq_head_stride})
    *t = sq.head;
  for (int64_t* t : {&params_.q_seq_stride, &params_.o_seq_stride, &params_.dout_seq_stride, &params_.dq_seq_stride})
    *t = sq.seq;
  for (int64_t* t :
       {&params_.k_batch_stride, &params_.v_batch_stride, &params_.dk_batch_stride, &params_.dv_batch_stride})
    *t = sk.batch;
  for (int64_t* t : {&params_.k_head_stride, &params_.v_head_stride, &params_.dk_head_stride, &params_.dv_head_stride})
    *t = sk.head;
  for (int64_t* t : {&params_.k_seq_stride, &params_.v_seq_stride, &params_.dk_seq_stride, &params_.dv_seq_stride})
    *t = sk.seq;
  size_t bytes = 0;
  workspace_query_ = evosdpa::backward_workspace_size(params_, bytes, kernel);
  workspace_ = std::make_unique<DeviceBuffer>(workspace_query_.ok() ? bytes : 0);
  params_.workspace = workspace_->ptr;
  params_.workspace_size = workspace_->bytes;
  poison();
}

void DeviceBackwardProblem::poison() {
  for (const DeviceBuffer* b : {&dq_, &dk_, &dv_, workspace_.get()})
    if (b->ptr) cudaMemset(b->ptr, 0xff, b->bytes);
  cudaDeviceSynchronize();
}

evosdpa::Result DeviceBackwardProblem::run(const std::string& kernel) const {
  return evosdpa::attention_backward(params_, nullptr, kernel);
}

const DeviceBuffer& DeviceBackwardProblem::buffer(Grad g) const {
  return g == Grad::dQ ? dq_ : g == Grad::dK ? dk_ : dv_;
}

std::vector<uint16_t> DeviceBackwardProblem::raw(Grad g) const {
  const DeviceBuffer& b = buffer(g);
  std::vector<uint16_t> host(b.bytes / 2);
  if (!host.empty() && cudaMemcpy(host.data(), b.ptr, b.bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
    throw std::runtime_error("download failed");
  return host;
}

Gradients DeviceBackwardProblem::gradients() const {
  Gradients out;
  for (Grad g : kGrads) {
    const int64_t heads = g == Grad::dQ ? shape_.heads_q : shape_.heads_kv, len = gradient_length(shape_, g);
    const Strides st = strides_for(layout_, heads, len, shape_.head_dim);
    out[g] = gather(raw(g), shape_.batch, heads, len, shape_.head_dim, dtype_, st.batch, st.head, st.seq);
  }
  return out;
}

std::string padding_written(const std::vector<uint16_t>& raw, Layout layout, int64_t batch, int64_t heads,
                            int64_t seqlen, int64_t head_dim) {
  const Strides st = strides_for(layout, heads, seqlen, head_dim);
  std::vector<char> inside(raw.size(), 0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t l = 0; l < seqlen; ++l)
        std::fill_n(&inside[static_cast<size_t>(b * st.batch + h * st.head + l * st.seq)], head_dim, 1);
  for (size_t i = 0; i < raw.size(); ++i)
    if (!inside[i] && raw[i] != 0xffff) return "padding element " + std::to_string(i) + " was written";
  return "";
}

}  // namespace gpu_test
