// The arguments every kernel receives: a plain struct of pointers, sizes and strides, built once on the
// host from the validated public parameters (see make_kernel_params in dispatch.cpp).
#pragma once

#include "kernels/rtc_std.hpp"

#include "evosdpa/evosdpa.h"

namespace evosdpa::detail {

// A window side without a bound (see KernelParams::window_left).
// 2^30 - 1: no row of a sequence of at most EVOSDPA_MAX_SEQLEN keys and queries reaches past it, and
// i + offset + bound + 1 (i + offset < 2^30) stays below 2^31.
inline constexpr int kNoWindowBound = static_cast<int>(EVOSDPA_MAX_SEQLEN) - 1;

struct KernelParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;  // nullptr when not requested; row i of (b, h) at b * lse_batch_stride + h * lse_head_stride + i
               // (+ the sequence's q_start when packed: [heads_q, total_q])
  int64_t lse_batch_stride, lse_head_stride;

  int batch;
  int heads_q;
  int kv_group;  // heads_q / heads_kv: query head h reads key/value head h / kv_group
  int seqlen_q;
  int seqlen_k;
  int head_dim;  // D; the mma_sm80 kernels have it as a template constant, the reference kernel reads it

  // Strides in elements; head_dim is contiguous.
  int64_t q_batch_stride, q_head_stride, q_seq_stride;
  int64_t k_batch_stride, k_head_stride, k_seq_stride;
  int64_t v_batch_stride, v_head_stride, v_seq_stride;
  int64_t o_batch_stride, o_head_stride, o_seq_stride;

  float scale;       // softmax scale applied to Q.K
  float scale_log2;  // scale * log2(e): the kernels exponentiate with exp2

  // Query i sees key j when !causal or j <= i + causal_offset (0 for top-left, seqlen_k - seqlen_q for
  // bottom-right).
  int causal;
  int causal_offset;
  // FP8 inputs: the element type of O, and the descales (device floats, read at
  // b * descale_batch_stride + h_kv * descale_head_stride); nullptr with 16-bit inputs.
  evosdpa_dtype_t o_dtype;
  const float* q_descale;
  const float* k_descale;
  const float* v_descale;
  int64_t descale_batch_stride, descale_head_stride;

  // A KV cache (evosdpa.h, "Serving"). seqused_k: nullptr, or per-sequence key counts (device int32
  // [batch], clamped into [0, seqlen_k] where read). page_table: nullptr (K/V dense), or the page of
  // each page_size keys per sequence; k_/v_batch_stride are then the stride between pages.
  const int32_t* seqused_k;
  const int32_t* page_table;
  int64_t page_table_batch_stride;
  int page_size;
  int num_pages;
  bool causal_bottom_right;  // with seqused_k the offset is per sequence: seqused_k[b] - seqlen_q
  // Split-KV (splitkv_sm80): parts per (sequence, K/V head), and the float32 partials when num_splits > 1.
  int num_splits;
  void* workspace;
  // Variable-length batches (evosdpa.h): nullptr, or device int32 [batch + 1]: sequence b's rows of the
  // packed q and o (k and v) start at cu_seqlens_q[b] (cu_seqlens_k[b]); their batch strides are then 0.
  // Read through sequence_of() (sequence.cuh), which clamps them into [0, total_q] ([0, total_k]).
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  int total_q, total_k;
  // Sliding window (evosdpa.h): query i sees keys i + offset - window_left .. i + offset + window_right,
  // offset the sequence's diagonal (causal_offset: bottom-right unless a top-left causal mask, so that
  // causal_bottom_right is set for a window without a causal mask too); a side without a bound holds
  // kNoWindowBound.
  // softcap: c > 0, scores become c * tanh(s / c). Read only by kernels instantiated with these features
  // (ScoreMods, kernels/score_mods.cuh); 0 and 0 otherwise.
  bool sliding_window;
  int window_left, window_right;
  float softcap;
  // A mask tensor (evosdpa.h "Mask tensors"): nullptr, or element (b, h, i, j) at b * mask_batch_stride +
  // h * mask_head_stride + i * mask_seq_stride + j of mask_type's elements (a byte, or the inputs' dtype).
  // Read only by kernels instantiated with it (ScoreMods::kMask); nullptr and NONE otherwise.
  const void* mask;
  evosdpa_mask_type_t mask_type;
  int64_t mask_batch_stride, mask_head_stride, mask_seq_stride;
  // ALiBi (evosdpa.h): nullptr, or float32 slopes, head h of batch entry b at b * alibi_batch_stride + h;
  // query i adds -slope * |i + causal_offset - j| to its scaled score of key j (causal_offset set as for
  // a window). Read only by kernels instantiated with it (ScoreMods::kAlibi).
  const float* alibi_slopes;
  int64_t alibi_batch_stride;
};

}  // namespace evosdpa::detail
