// Argument validation of the backward pass (evosdpa_attention_backward): the forward's common checks
// on q, k, v, o, then dout, dq, dk, dv, the lse it reads, what may alias what, and the workspace.
#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include "validation.hpp"

namespace evosdpa::detail {
namespace {

// The bytes the kernel may touch: the first `needed` bytes.
TensorView workspace_view(const evosdpa_params_t& p, size_t needed) {
  return {"workspace", p.workspace, {1, 1, 1, static_cast<int64_t>(needed)}, {0, 0, 0, 1}};
}

using NamedSpan = std::pair<const char*, ByteSpan>;

// What the backward pass reads: q, k, v, o, dout, lse.
std::array<NamedSpan, 6> input_spans(const evosdpa_params_t& p) {
  const std::array<TensorView, 4> fw = tensors(p);
  const std::array<TensorView, 4> bw = backward_tensors(p);
  const size_t elem = input_elem_bytes(p);
  return {{{"q", byte_span(fw[0], elem)},
           {"k", byte_span(fw[1], elem)},
           {"v", byte_span(fw[2], elem)},
           {"o", byte_span(fw[3], elem)},
           {"dout", byte_span(bw[0], elem)},
           {"lse", has_no_queries(p) ? ByteSpan{} : byte_span(lse_view(p), 4)}}};
}

// What it writes: dq, dk, dv.
std::array<NamedSpan, 3> output_spans(const evosdpa_params_t& p) {
  const std::array<TensorView, 4> bw = backward_tensors(p);
  const size_t elem = input_elem_bytes(p);
  return {{{"dq", byte_span(bw[1], elem)}, {"dk", byte_span(bw[2], elem)}, {"dv", byte_span(bw[3], elem)}}};
}

// `name` (span `out`) must share no byte with any input nor with the outputs in `others`.
template <size_t N>
Check check_no_alias(const char* name, const ByteSpan& out, const std::array<NamedSpan, 6>& inputs,
                     const std::array<NamedSpan, N>& others) {
  for (const auto& [in_name, span] : inputs)
    if (out.intersects(span))
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(name) + " (bytes " + hex(out.first) + ".." +
                                                      hex(out.last) + ") overlaps input " + in_name + " (from " +
                                                      hex(span.first) + "); outputs must not alias inputs");
  for (const auto& [other, span] : others)
    if (other != nullptr && other != name && out.intersects(span))
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(name) + " and " + other + " overlap");
  return {};
}

}  // namespace

std::array<TensorView, 4> backward_tensors(const evosdpa_params_t& p) {
  return {{
      {"dout", p.dout, {p.batch, p.heads_q, p.seqlen_q, p.head_dim}, {p.dout_batch_stride, p.dout_head_stride, p.dout_seq_stride, 1}},
      {"dq", p.dq, {p.batch, p.heads_q, p.seqlen_q, p.head_dim}, {p.dq_batch_stride, p.dq_head_stride, p.dq_seq_stride, 1}},
      {"dk", p.dk, {p.batch, p.heads_kv, p.seqlen_k, p.head_dim}, {p.dk_batch_stride, p.dk_head_stride, p.dk_seq_stride, 1}},
      {"dv", p.dv, {p.batch, p.heads_kv, p.seqlen_k, p.head_dim}, {p.dv_batch_stride, p.dv_head_stride, p.dv_seq_stride, 1}},
  }};
}

bool backward_has_no_work(const evosdpa_params_t& p) {
  // heads_kv, not heads_q: heads_q 0 under heads_kv > 0 still has dK and dV rows to zero-fill.
  return p.batch == 0 || p.heads_kv == 0 || (p.seqlen_q == 0 && p.seqlen_k == 0);
}

Check validate_backward_params(const evosdpa_params_t& p) {
  if (Check c = validate_common(p); !c.ok()) return c;
  if (p.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3)
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED, "the backward pass takes fp16 or bf16 inputs; FP8 (E4M3) has none");
  if (uses_kv_cache(p))
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED,
                "the backward pass takes dense K and V: seqused_k and page_table (a KV cache) are forward-only");
  if (uses_varlen(p))
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED,
                "the backward pass takes padded batches: variable-length ones (cu_seqlens_q, cu_seqlens_k) are "
                "forward-only");
  if (uses_score_mods(p))
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED,
                "the backward pass has no sliding window, softcap, mask tensor or ALiBi: they are forward-only "
                "(sliding_window, softcap, mask, alibi_slopes)");
  if (p.backward_mode != EVOSDPA_BACKWARD_DETERMINISTIC && p.backward_mode != EVOSDPA_BACKWARD_FAST)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "backward_mode " + std::to_string(static_cast<int>(p.backward_mode)) +
                                                    " is not an evosdpa_backward_mode_t value");
  const std::array<TensorView, 4> bw = backward_tensors(p);
  for (const TensorView& t : bw)
    if (Check c = check_tensor(t, input_elem_bytes(p)); !c.ok()) return c;
  if (!has_no_queries(p)) {
    if (p.lse == nullptr)
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT,
                  "lse is a null pointer: the backward pass reads the forward's log-sum-exp (float32 [batch, "
                  "heads_q, seqlen_q])");
    if (reinterpret_cast<uintptr_t>(p.lse) % 4 != 0)
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "lse is not 4-byte aligned");
  }
  for (int t = 1; t < 4; ++t)
    if (!bw[t].empty() && self_overlapping(bw[t]))
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(bw[t].name) +
                                                      " strides make distinct output elements overlap (batch " +
                                                      std::to_string(bw[t].strides[0]) + ", head " +
                                                      std::to_string(bw[t].strides[1]) + ", seq " +
                                                      std::to_string(bw[t].strides[2]) + ")");
  const std::array<NamedSpan, 6> inputs = input_spans(p);
  const std::array<NamedSpan, 3> outputs = output_spans(p);
  for (const auto& [name, span] : outputs)
    if (Check c = check_no_alias(name, span, inputs, outputs); !c.ok()) return c;
  return {};
}

Check check_workspace(const evosdpa_params_t& p, size_t needed) {
  if (p.workspace_size < needed)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "workspace_size " + std::to_string(p.workspace_size) +
                                                    " is below the " + std::to_string(needed) +
                                                    " bytes this call needs (evosdpa_backward_workspace_size)");
  if (needed == 0) return {};
  if (p.workspace == nullptr) return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "workspace is a null pointer");
  if (reinterpret_cast<uintptr_t>(p.workspace) % kWorkspaceAlignment != 0)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT,
                "workspace is not " + std::to_string(kWorkspaceAlignment) + "-byte aligned");
  return check_no_alias("workspace", byte_span(workspace_view(p, needed), 1), input_spans(p), output_spans(p));
}

Check check_backward_grid(const evosdpa_params_t& p, int64_t block_n) {
  // Every factor is below 2^31, but their product can pass 2^63.
  const __int128 k_blocks = static_cast<__int128>((p.seqlen_k + block_n - 1) / block_n) * p.batch * p.heads_kv;
  const __int128 rows = static_cast<__int128>(p.batch) * p.heads_q * p.seqlen_q;
  if (k_blocks > INT32_MAX || rows > INT32_MAX)
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED, "batch * heads * seqlen exceeds 2^31-1 rows or blocks");
  return {};
}

Check check_backward_row_alignment(const evosdpa_params_t& p, int64_t bytes) {
  if (Check c = check_row_alignment(p, bytes); !c.ok()) return c;
  for (const TensorView& t : backward_tensors(p))
    if (Check c = check_tensor_row_alignment(t, input_elem_bytes(p), bytes); !c.ok()) return c;
  return {};
}

}  // namespace evosdpa::detail
