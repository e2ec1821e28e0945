// Argument validation: everything that can be checked from the arguments alone (enums, sizes, null,
// misaligned and aliasing pointers, strides, overflow), and the normalisation of a caller's params
// struct of any ABI size. Says nothing about kernels or devices; needs no GPU.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "evosdpa/evosdpa.h"

namespace evosdpa::detail {

struct Check {
  evosdpa_status_t status = EVOSDPA_SUCCESS;
  std::string message;
  bool ok() const { return status == EVOSDPA_SUCCESS; }
};

inline Check fail(evosdpa_status_t status, std::string message) { return Check{status, std::move(message)}; }

// log2(e): the kernels work in the log2 domain (make_kernel_params's scale_log2 = scale * log2(e)).
inline constexpr double kLog2e = 1.4426950408889634;

// The size of the first evosdpa_params_t that carried struct_size (every field up to `causal`): the
// smallest struct the library accepts.
inline constexpr size_t kParamsMinSize = offsetof(evosdpa_params_t, causal) + sizeof(evosdpa_causal_t);
// The largest struct_size the library reads: far above any header's (568 bytes in 0.9), so that an
// uninitialised struct's garbage size is refused instead of read as a newer caller's bytes.
inline constexpr size_t kParamsMaxSize = 4096;
// Whether `size` can be a struct_size: every evosdpa_params_t's sizeof is a multiple of its alignment (a
// size ending inside a field, e.g. half a pointer, would copy part of it), within the two bounds above.
// The message says what is wrong with it and how to get a valid one.
Check check_struct_size(size_t size);

// Copy the caller's struct of params->struct_size bytes into `out`, a struct of this library's size:
// fields the caller lacks keep their defaults, bytes the library does not know must be zero (see the
// ABI rule in evosdpa.h).
Check normalize_params(const evosdpa_params_t* params, evosdpa_params_t& out);

// Head dims every kernel supports; anything else is refused up front.
bool head_dim_supported(int64_t head_dim);

// Whether a problem has no output rows at all (nothing to launch): no sequence, head or query row
// (packed queries: total_q 0).
bool has_no_queries(const evosdpa_params_t& p);

// Validate a normalised struct for the forward call: validate_common, then O's and lse's rules as
// outputs (no self-overlap, no byte shared with an input or each other).
Check validate_params(const evosdpa_params_t& p);

// What both passes check: enums, sizes, head_dim, the FP8 fields, and q, k, v, o as tensors
// (check_tensor).
Check validate_common(const evosdpa_params_t& p);

// One tensor of the call as [batch, heads, seq, head_dim] with element strides (head_dim contiguous).
struct TensorView {
  const char* name;
  const void* ptr;
  int64_t sizes[4];
  int64_t strides[4];
  // Each size tested alone: their product can overflow int64 (to 0, say) while none is 0.
  bool empty() const { return sizes[0] == 0 || sizes[1] == 0 || sizes[2] == 0 || sizes[3] == 0; }
};
// q, k, v, o in that order.
std::array<TensorView, 4> tensors(const evosdpa_params_t& p);
// Bytes per element of q, k, v (the dtype) and of o (o_dtype with FP8 inputs, else the dtype); 0 for a
// value that is not an evosdpa_dtype_t.
size_t input_elem_bytes(const evosdpa_params_t& p);
size_t output_elem_bytes(const evosdpa_params_t& p);
// The element type of o: o_dtype with FP8 inputs, else the inputs' dtype.
evosdpa_dtype_t output_dtype(const evosdpa_params_t& p);
extern const char* const kDimNames[4];

// Bytes [first, last] that a tensor's elements span (first > last when it is empty).
struct ByteSpan {
  uintptr_t first = 1, last = 0;
  bool empty() const { return first > last; }
  bool intersects(const ByteSpan& o) const { return !empty() && !o.empty() && first <= o.last && o.first <= last; }
};
ByteSpan byte_span(const TensorView& t, size_t elem_bytes);

// Largest element offset of a tensor; nullopt if it does not fit in int64.
std::optional<int64_t> max_offset(const TensorView& t);
// True when two different indices of the tensor address the same element.
bool self_overlapping(const TensorView& t);
// "0x..." for messages.
std::string hex(uintptr_t x);
// Non-negative strides, and, when the tensor has elements: a pointer, element alignment, offsets that
// fit in 64 bits.
Check check_tensor(const TensorView& t, size_t elem_bytes);

// A kernel family's alignment rule for chunked copies: every non-empty tensor starts on a `bytes`
// boundary and its strides (of dims longer than 1) are multiples of `bytes`, in its own elements.
// The message names the tensor, dimension and values, without the family's prefix.
Check check_row_alignment(const evosdpa_params_t& p, int64_t bytes);
// The same rule for one tensor of `elem_bytes`-byte elements (nothing to check when it is empty).
Check check_tensor_row_alignment(const TensorView& t, size_t elem_bytes, int64_t bytes);

// The workspace's alignment: its float32 arrays are read and written in 16-byte vectors.
inline constexpr size_t kWorkspaceAlignment = 16;

// Every tensor of the forward call by name with its byte span: the inputs (q, k, v, the descales,
// seqused_k, page_table, cu_seqlens_q, cu_seqlens_k, the mask, the ALiBi slopes), then the outputs o and lse.
inline constexpr int kForwardInputs = 12;
std::array<std::pair<const char*, ByteSpan>, kForwardInputs + 2> forward_spans(const evosdpa_params_t& p);
// The lse as a [batch, heads_q, seqlen_q] tensor of floats: contiguous, or [heads_q, total_q] packed.
TensorView lse_view(const evosdpa_params_t& p);

// ---- The KV-cache fields (validation_kvcache.cpp) ----

// Whether a caller's struct of `struct_size` bytes comes from a 0.5 header or later (it has num_splits):
// only such callers' workspace is the forward's too.
inline constexpr bool knows_forward_workspace(size_t struct_size) {
  return struct_size >= offsetof(evosdpa_params_t, num_splits) + sizeof(int64_t);
}

// Whether the call reads a KV cache: per-sequence key counts or a page table (kernels that serve neither
// refuse such calls).
bool uses_kv_cache(const evosdpa_params_t& p);
// Columns of the page table a sequence of seqlen_k keys needs: ceil(seqlen_k / page_size); 0 when dense.
int64_t page_table_columns(const evosdpa_params_t& p);
// seqused_k [batch] and page_table [batch, columns] as tensors of int32.
std::array<TensorView, 2> kv_cache_index_views(const evosdpa_params_t& p);
// The fields' own rules (called by validate_common): alignment, page_size a positive multiple of 16, the
// table's stride and size, paging fields only with a table, num_splits >= 0.
Check check_kv_cache_fields(const evosdpa_params_t& p);
// For a family that reads dense K/V and does not split keys through the workspace: NOT_SUPPORTED
// (without the family's prefix) when the call has seqused_k, a page table or num_splits > 1.
Check check_no_kv_cache(const evosdpa_params_t& p);
// The same for a page table or num_splits > 1 (families that read per-sequence key counts of dense K/V).
Check check_no_page_table(const evosdpa_params_t& p);
// The same for num_splits > 1 alone (the reference kernel reads KV caches but never splits).
Check check_no_splits(const evosdpa_params_t& p);
// The forward's split-KV workspace of `needed` bytes: big enough, aligned, sharing no byte with a tensor.
Check check_forward_workspace(const evosdpa_params_t& p, size_t needed);

// ---- Variable-length batches (validation_varlen.cpp) ----

// Whether q/o or k/v are packed sequences (cu_seqlens_q or cu_seqlens_k).
bool uses_varlen(const evosdpa_params_t& p);
// cu_seqlens_q and cu_seqlens_k as int32 tensors of batch + 1 entries (empty when null).
std::array<TensorView, 2> varlen_index_views(const evosdpa_params_t& p);
// The fields' own rules (called by validate_common): alignment, totals in [0, 2^31-1] and set only with
// their array, zero batch strides for packed tensors, no cu_seqlens_k with a page table.
Check check_varlen_fields(const evosdpa_params_t& p);
// For a family that reads padded tensors only: NOT_SUPPORTED (without the family's prefix) for varlen.
Check check_no_varlen(const evosdpa_params_t& p);

// ---- The backward pass (validation_backward.cpp) ----

// dout, dq, dk, dv in that order (dout and dq have Q's shape, dk and dv K's).
std::array<TensorView, 4> backward_tensors(const evosdpa_params_t& p);

// A tensor-core backward's grid: a block per `block_n` keys of each (batch, K/V head), and its passes' per
// query row, each at most 2^31-1 (NOT_SUPPORTED past it).
Check check_backward_grid(const evosdpa_params_t& p, int64_t block_n);

// Whether there is no gradient to write at all (no dQ row and no dK/dV row). seqlen_q == 0 alone is
// work: dK and dV are then zero-filled; so is heads_q == 0 under heads_kv > 0.
bool backward_has_no_work(const evosdpa_params_t& p);

// Everything but the workspace: validate_common, a 16-bit dtype, the mode, dout/dq/dk/dv as tensors,
// the lse it reads, no self-overlapping gradient, and no gradient sharing a byte with an input or
// another gradient.
Check validate_backward_params(const evosdpa_params_t& p);

// The workspace a family needs, `needed` bytes: big enough, aligned, and sharing no byte with a tensor.
Check check_workspace(const evosdpa_params_t& p, size_t needed);

// check_row_alignment over q, k, v, o and dout, dq, dk, dv.
Check check_backward_row_alignment(const evosdpa_params_t& p, int64_t bytes);

// ---- Sliding window, softcap, mask tensors and ALiBi (validation_mods.cpp) ----

// Whether the call asks for a sliding window, a softcap, a mask tensor, ALiBi, or any of them.
bool uses_window(const evosdpa_params_t& p);
bool uses_softcap(const evosdpa_params_t& p);
bool uses_mask(const evosdpa_params_t& p);
bool uses_alibi(const evosdpa_params_t& p);
bool uses_score_mods(const evosdpa_params_t& p);
// Bytes per mask element (1 for BOOL, the dtype's for ADDITIVE; 0 without a mask), and the mask as a
// [batch, heads_q, seqlen_q, seqlen_k] tensor at its strides (empty without one).
size_t mask_elem_bytes(const evosdpa_params_t& p);
TensorView mask_view(const evosdpa_params_t& p);
// The ALiBi slopes as a [batch, 1, 1, heads_q] tensor of floats (empty without them).
TensorView alibi_view(const evosdpa_params_t& p);
// The fields' own rules (called by validate_common): sliding_window 0 or 1, bounds >= -1 and 0 without a
// window, softcap finite and >= 0; a mask with a mask_type (and strides only with one), 16-bit inputs,
// no per-sequence lengths, and a tensor's rules (pointer, alignment, non-negative strides); ALiBi slopes
// with 16-bit inputs, a tensor's rules, and no alibi_batch_stride without them.
Check check_score_mod_fields(const evosdpa_params_t& p);
// For a family that has neither: NOT_SUPPORTED (without the family's prefix) when the call asks for one.
Check check_no_score_mods(const evosdpa_params_t& p);
// The softcaps the fast kernels (wgmma_sm90, mma_sm80) take: c <= kMaxFastSoftcap, and 2 scale log2(e) / c
// a float for the call's scale (the effective one); NOT_SUPPORTED (without the family's prefix) otherwise,
// naming reference, which takes any. Their tanh is c log2(e) (1 - 2 / (2^(2 s log2(e) / c) + 1)), whose
// last subtraction leaves ~1.7e-7 c on the log2-domain score (a float emulation over scores of sigma 1:
// 5.1e-6 at c = 30, 1.7e-4 at 1,000, 1.7e-3 at 10,000; the GPU kernels likewise, O off by 0.42 at 1e7);
// up to 2048 that moves P by at most 2.4e-4, half of fp16's rounding of it. A subnormal c made the
// factor infinite (O = NaN from a zero score).
inline constexpr float kMaxFastSoftcap = 2048.f;
Check check_fast_softcap(const evosdpa_params_t& p, float scale);

}  // namespace evosdpa::detail
