// One sequence of a batch as the kernels see it: where its rows start in q/o and k/v, how many queries
// and keys it has, and where its causal diagonal lies. Padded batches have every sequence at row 0 of
// its batch entry with seqlen_q queries and seqlen_k keys; packed ones (cu_seqlens_*) start where the
// offsets say; seqused_k shortens the keys. Every value read from device memory is clamped, so that no
// index leaves the tensors whatever the arrays hold (evosdpa.h, "Variable-length batches").
#pragma once

#include "kernels/kernel_params.hpp"
#include "kernels/rtc_std.hpp"

namespace evosdpa::detail {

struct Sequence {
  int q_start;  // its first row in q, o (and, packed, the lse): 0 unless cu_seqlens_q
  int k_start;  // its first row in k, v: 0 unless cu_seqlens_k
  int len_q;    // its queries, <= seqlen_q
  int len_k;    // its keys, <= seqlen_k
  // With p.causal, query i sees key j when j <= i + causal_offset: 0 top-left, len_k - len_q bottom-right.
  int causal_offset;
};

// Rows [start, start + len) of a packed run of `total` rows from offsets cu[b], cu[b + 1], with len at
// most `longest`.
__device__ __forceinline__ void packed_rows(const int32_t* cu, int b, int total, int longest, int& start, int& len) {
  start = min(max(cu[b], 0), total);
  const int end = min(max(cu[b + 1], start), total);
  len = min(end - start, longest);
}

// Every sequence of a padded call without seqused_k: the call's lengths and diagonal, from the parameter
// bank (kernels or rows that serve only such calls use it to keep per-sequence values out of registers).
__device__ __forceinline__ Sequence padded_sequence(const KernelParams& p) {
  return {0, 0, p.seqlen_q, p.seqlen_k, p.causal_offset};
}

__device__ __forceinline__ Sequence sequence_of(const KernelParams& p, int b) {
  Sequence s{0, 0, p.seqlen_q, p.seqlen_k, 0};
  if (p.cu_seqlens_q != nullptr) packed_rows(p.cu_seqlens_q, b, p.total_q, p.seqlen_q, s.q_start, s.len_q);
  if (p.cu_seqlens_k != nullptr) packed_rows(p.cu_seqlens_k, b, p.total_k, p.seqlen_k, s.k_start, s.len_k);
  if (p.seqused_k != nullptr) s.len_k = min(s.len_k, max(p.seqused_k[b], 0));
  s.causal_offset = p.causal_bottom_right ? s.len_k - s.len_q : 0;
  return s;
}

// Whether a call's sequences have lengths or rows of their own (packed, or seqused_k): sequence_of's
// reads, where padded_sequence serves the others.
__host__ __device__ __forceinline__ bool own_sequences(const KernelParams& p) {
  return p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr || p.seqused_k != nullptr;
}

// Where a kernel instantiation reads its sequences, as a compile-time policy. CallSequences serves calls
// without sequences of their own (own_sequences false): every value comes from the parameter bank, the
// sequences' first rows are the constant 0, so the kernel carries no per-sequence loads or arithmetic;
// OwnSequences serves any call through sequence_of.
struct CallSequences {
  static constexpr bool kOwn = false;
  static __device__ __forceinline__ Sequence of(const KernelParams& p, int) { return padded_sequence(p); }
};
struct OwnSequences {
  static constexpr bool kOwn = true;
  static __device__ __forceinline__ Sequence of(const KernelParams& p, int b) { return sequence_of(p, b); }
};

}  // namespace evosdpa::detail
