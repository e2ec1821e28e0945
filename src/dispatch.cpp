#include "dispatch.hpp"

#include <cmath>

#include "validation.hpp"

namespace evosdpa::detail {

float effective_scale(const evosdpa_params_t& p) {
  return !std::isnan(p.softmax_scale) ? p.softmax_scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.head_dim)));
}

KernelParams make_kernel_params(const evosdpa_params_t& p) {
  KernelParams k{};
  k.q = p.q;
  k.k = p.k;
  k.v = p.v;
  k.o = p.o;
  k.lse = p.lse;
  const bool packed_q = p.cu_seqlens_q != nullptr;
  k.lse_batch_stride = packed_q ? 0 : p.heads_q * p.seqlen_q;
  k.lse_head_stride = packed_q ? p.total_q : p.seqlen_q;
  k.batch = static_cast<int>(p.batch);
  k.heads_q = static_cast<int>(p.heads_q);
  k.kv_group = p.heads_kv > 0 ? static_cast<int>(p.heads_q / p.heads_kv) : 1;
  k.seqlen_q = static_cast<int>(p.seqlen_q);
  k.seqlen_k = static_cast<int>(p.seqlen_k);
  k.head_dim = static_cast<int>(p.head_dim);
  k.q_batch_stride = p.q_batch_stride;
  k.q_head_stride = p.q_head_stride;
  k.q_seq_stride = p.q_seq_stride;
  k.k_batch_stride = p.k_batch_stride;
  k.k_head_stride = p.k_head_stride;
  k.k_seq_stride = p.k_seq_stride;
  k.v_batch_stride = p.v_batch_stride;
  k.v_head_stride = p.v_head_stride;
  k.v_seq_stride = p.v_seq_stride;
  k.o_batch_stride = p.o_batch_stride;
  k.o_head_stride = p.o_head_stride;
  k.o_seq_stride = p.o_seq_stride;
  k.scale = effective_scale(p);
  k.scale_log2 = static_cast<float>(static_cast<double>(k.scale) * kLog2e);
  k.causal = p.causal != EVOSDPA_CAUSAL_NONE;
  // The diagonal: bottom-right for a bottom-right causal mask and for a window or ALiBi without a causal
  // mask (FlashAttention's alignment, evosdpa.h).
  const bool bottom_right = p.causal == EVOSDPA_CAUSAL_BOTTOM_RIGHT ||
                            ((uses_window(p) || uses_alibi(p)) && p.causal == EVOSDPA_CAUSAL_NONE);
  k.causal_offset = bottom_right ? static_cast<int>(p.seqlen_k - p.seqlen_q) : 0;
  k.o_dtype = output_dtype(p);
  k.q_descale = p.q_descale;
  k.k_descale = p.k_descale;
  k.v_descale = p.v_descale;
  k.descale_batch_stride = p.descale_batch_stride;
  k.descale_head_stride = p.descale_head_stride;
  k.seqused_k = p.seqused_k;
  k.page_table = p.page_table;
  k.page_table_batch_stride = p.page_table_batch_stride;
  k.page_size = static_cast<int>(p.page_size);
  k.num_pages = static_cast<int>(p.num_pages);
  k.causal_bottom_right = bottom_right;
  const auto bound = [](int64_t w) { return static_cast<int>(w >= 0 && w < kNoWindowBound ? w : kNoWindowBound); };
  k.sliding_window = uses_window(p);
  k.window_left = uses_window(p) ? bound(p.window_left) : 0;
  k.window_right = uses_window(p) ? bound(p.window_right) : 0;
  k.softcap = p.softcap;
  k.mask = p.mask;
  k.mask_type = static_cast<evosdpa_mask_type_t>(p.mask_type);
  k.mask_batch_stride = p.mask_batch_stride;
  k.mask_head_stride = p.mask_head_stride;
  k.mask_seq_stride = p.mask_seq_stride;
  k.alibi_slopes = p.alibi_slopes;
  k.alibi_batch_stride = p.alibi_batch_stride;
  k.num_splits = 1;
  k.workspace = nullptr;
  k.cu_seqlens_q = p.cu_seqlens_q;
  k.cu_seqlens_k = p.cu_seqlens_k;
  k.total_q = static_cast<int>(p.total_q);
  k.total_k = static_cast<int>(p.total_k);
  return k;
}

cudaError_t run_kernel(const Selection& chosen, const evosdpa_params_t& p, cudaStream_t stream) {
  KernelParams k = make_kernel_params(p);
  k.num_splits = chosen.splits;
  k.workspace = chosen.workspace_bytes > 0 ? p.workspace : nullptr;  // what the family asked for, if given
  return chosen.family->launch(k, p.dtype, chosen.variant, stream);
}

BackwardParams make_backward_params(const evosdpa_params_t& p) {
  BackwardParams k{};
  k.fwd = make_kernel_params(p);
  k.dout = p.dout;
  k.dq = p.dq;
  k.dk = p.dk;
  k.dv = p.dv;
  k.dout_batch_stride = p.dout_batch_stride;
  k.dout_head_stride = p.dout_head_stride;
  k.dout_seq_stride = p.dout_seq_stride;
  k.dq_batch_stride = p.dq_batch_stride;
  k.dq_head_stride = p.dq_head_stride;
  k.dq_seq_stride = p.dq_seq_stride;
  k.dk_batch_stride = p.dk_batch_stride;
  k.dk_head_stride = p.dk_head_stride;
  k.dk_seq_stride = p.dk_seq_stride;
  k.dv_batch_stride = p.dv_batch_stride;
  k.dv_head_stride = p.dv_head_stride;
  k.dv_seq_stride = p.dv_seq_stride;
  k.workspace = p.workspace;
  k.heads_kv = static_cast<int>(p.heads_kv);
  k.fast = p.backward_mode == EVOSDPA_BACKWARD_FAST;
  return k;
}

cudaError_t run_backward(const Selection& chosen, const evosdpa_params_t& p, cudaStream_t stream) {
  return chosen.family->backward->launch(make_backward_params(p), p.dtype, chosen.variant, stream);
}

}  // namespace evosdpa::detail
