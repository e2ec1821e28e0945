#include "validation.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>

namespace evosdpa::detail {
namespace {


std::string dtype_string(evosdpa_dtype_t d) {
  switch (d) {
    case EVOSDPA_DTYPE_FLOAT16: return "fp16";
    case EVOSDPA_DTYPE_BFLOAT16: return "bf16";
    case EVOSDPA_DTYPE_FLOAT8_E4M3: return "fp8_e4m3";
  }
  return "dtype " + std::to_string(static_cast<int>(d));
}

// A descale as a [batch, heads_kv] tensor of floats at the descale strides.
TensorView descale_view(const char* name, const float* ptr, const evosdpa_params_t& p) {
  return {name, ptr, {p.batch, p.heads_kv, 1, 1}, {p.descale_batch_stride, p.descale_head_stride, 1, 1}};
}

std::array<TensorView, 3> descales(const evosdpa_params_t& p) {
  return {{descale_view("q_descale", p.q_descale, p), descale_view("k_descale", p.k_descale, p),
           descale_view("v_descale", p.v_descale, p)}};
}

// The FP8 fields: with FP8 inputs an fp16/bf16 o_dtype and all three descales (float pointers, 4-byte
// aligned, non-negative strides); with 16-bit inputs none of them, so that a scale meant for FP8 data is
// never silently ignored.
Check check_fp8_fields(const evosdpa_params_t& p) {
  const std::array<TensorView, 3> ds = descales(p);
  if (p.dtype != EVOSDPA_DTYPE_FLOAT8_E4M3) {
    if (p.o_dtype != 0 && p.o_dtype != p.dtype)
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT,
                  "o_dtype " + std::to_string(static_cast<int>(p.o_dtype)) + " is for FP8 inputs; with " +
                      dtype_string(p.dtype) + " inputs O has their dtype (leave o_dtype 0)");
    for (const TensorView& d : ds)
      if (d.ptr != nullptr)
        return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(d.name) + " is set but the inputs are " +
                                                        dtype_string(p.dtype) +
                                                        ": descales apply to FP8 (EVOSDPA_DTYPE_FLOAT8_E4M3) inputs only");
    if (p.descale_batch_stride != 0 || p.descale_head_stride != 0)
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "descale strides are set but the inputs are " +
                                                      dtype_string(p.dtype) + ": they apply to FP8 inputs only");
    return {};
  }
  if (p.o_dtype != EVOSDPA_DTYPE_FLOAT16 && p.o_dtype != EVOSDPA_DTYPE_BFLOAT16)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "o_dtype " + std::to_string(static_cast<int>(p.o_dtype)) +
                                                    " is not fp16 (0) or bf16 (1): FP8 inputs give an fp16 or bf16 output");
  if (p.descale_batch_stride < 0 || p.descale_head_stride < 0)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "descale strides are negative (batch " +
                                                    std::to_string(p.descale_batch_stride) + ", head " +
                                                    std::to_string(p.descale_head_stride) + ")");
  for (const TensorView& d : ds) {
    if (d.ptr == nullptr)
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT,
                  std::string(d.name) + " is a null pointer: FP8 inputs need q_descale, k_descale and v_descale "
                                        "(float32 device memory; a missing scale is not taken as 1)");
    if (reinterpret_cast<uintptr_t>(d.ptr) % 4 != 0)
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(d.name) + " is not 4-byte aligned");
    if (!d.empty() && !max_offset(d))
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "descale strides overflow a 64-bit offset");
  }
  return {};
}

}  // namespace

// Largest element offset of a tensor; nullopt if it does not fit in int64.
std::optional<int64_t> max_offset(const TensorView& t) {
  __int128 off = 0;
  for (int d = 0; d < 4; ++d) off += static_cast<__int128>(t.sizes[d] - 1) * t.strides[d];
  if (off > INT64_MAX) return std::nullopt;
  return static_cast<int64_t>(off);
}

// True when two different indices of the tensor address the same element: with the dims of size > 1
// sorted by stride, each stride must exceed the span of all smaller ones.
bool self_overlapping(const TensorView& t) {
  std::array<int, 4> order{0, 1, 2, 3};
  std::sort(order.begin(), order.end(), [&](int a, int b) { return t.strides[a] < t.strides[b]; });
  __int128 span = 0;
  for (int d : order) {
    if (t.sizes[d] <= 1) continue;
    if (t.strides[d] <= span) return true;
    span += static_cast<__int128>(t.sizes[d] - 1) * t.strides[d];
  }
  return false;
}

std::string hex(uintptr_t x) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(x));
  return buf;
}

Check check_tensor(const TensorView& t, size_t elem_bytes) {
  for (int d = 0; d < 3; ++d)
    if (t.strides[d] < 0)
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(t.name) + " " + kDimNames[d] +
                                                      " stride is negative (" + std::to_string(t.strides[d]) + ")");
  if (t.empty()) return {};
  if (t.ptr == nullptr) return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(t.name) + " is a null pointer");
  if (reinterpret_cast<uintptr_t>(t.ptr) % elem_bytes != 0)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(t.name) + " is not aligned to its " +
                                                    std::to_string(elem_bytes) + "-byte element size");
  if (!max_offset(t))
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(t.name) + " strides overflow a 64-bit offset");
  return {};
}

evosdpa_dtype_t output_dtype(const evosdpa_params_t& p) {
  return p.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3 ? p.o_dtype : p.dtype;
}
size_t input_elem_bytes(const evosdpa_params_t& p) { return evosdpa_dtype_size(p.dtype); }
size_t output_elem_bytes(const evosdpa_params_t& p) { return evosdpa_dtype_size(output_dtype(p)); }

const char* const kDimNames[4] = {"batch", "head", "seq", "head_dim"};

std::array<TensorView, 4> tensors(const evosdpa_params_t& p) {
  // A paged cache is [num_pages, heads_kv, page_size, head_dim] at the k_/v_ strides (evosdpa.h).
  const bool paged = p.page_table != nullptr;
  const int64_t kv_outer = paged ? (p.seqlen_k > 0 && p.batch > 0 ? p.num_pages : 0) : p.batch;
  const int64_t kv_rows = paged ? p.page_size : p.seqlen_k;
  // Packed sequences (cu_seqlens_*) are one [total, heads, head_dim] run of rows (their batch stride is 0).
  const bool packed_q = p.cu_seqlens_q != nullptr, packed_k = p.cu_seqlens_k != nullptr;
  const int64_t q_outer = packed_q ? (p.batch > 0 ? 1 : 0) : p.batch, q_rows = packed_q ? p.total_q : p.seqlen_q;
  const int64_t k_outer = packed_k ? (p.batch > 0 ? 1 : 0) : kv_outer, k_rows = packed_k ? p.total_k : kv_rows;
  return {{
      {"q", p.q, {q_outer, p.heads_q, q_rows, p.head_dim}, {p.q_batch_stride, p.q_head_stride, p.q_seq_stride, 1}},
      {"k", p.k, {k_outer, p.heads_kv, k_rows, p.head_dim}, {p.k_batch_stride, p.k_head_stride, p.k_seq_stride, 1}},
      {"v", p.v, {k_outer, p.heads_kv, k_rows, p.head_dim}, {p.v_batch_stride, p.v_head_stride, p.v_seq_stride, 1}},
      {"o", p.o, {q_outer, p.heads_q, q_rows, p.head_dim}, {p.o_batch_stride, p.o_head_stride, p.o_seq_stride, 1}},
  }};
}

ByteSpan byte_span(const TensorView& t, size_t elem_bytes) {
  if (t.empty() || t.ptr == nullptr) return {};
  const std::optional<int64_t> off = max_offset(t);
  const auto base = reinterpret_cast<uintptr_t>(t.ptr);
  if (!off) return {base, UINTPTR_MAX};
  const unsigned __int128 last = base + static_cast<unsigned __int128>(*off + 1) * elem_bytes - 1;
  return {base, last > UINTPTR_MAX ? UINTPTR_MAX : static_cast<uintptr_t>(last)};
}

Check check_struct_size(size_t size) {
  const std::string remedy = ": initialise the struct with evosdpa_params_init()";
  if (size < kParamsMinSize)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "struct_size is " + std::to_string(size) +
                                                    ", below the smallest evosdpa_params_t (" +
                                                    std::to_string(kParamsMinSize) + " bytes)" + remedy);
  if (size > kParamsMaxSize)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "struct_size is " + std::to_string(size) + ", above any evosdpa_params_t (" +
                                                    std::to_string(kParamsMaxSize) + " bytes at most)" + remedy);
  if (size % alignof(evosdpa_params_t) != 0)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "struct_size is " + std::to_string(size) + ", not a multiple of " +
                                                    std::to_string(alignof(evosdpa_params_t)) +
                                                    " as every evosdpa_params_t's size is" + remedy);
  return {};
}

Check normalize_params(const evosdpa_params_t* params, evosdpa_params_t& out) {
  if (params == nullptr) return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "params is a null pointer");
  const size_t size = params->struct_size;
  if (Check c = check_struct_size(size); !c.ok()) return fail(c.status, "params->" + c.message);
  if (size > sizeof(evosdpa_params_t)) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(params);
    for (size_t i = sizeof(evosdpa_params_t); i < size; ++i)
      if (bytes[i] != 0)
        return fail(EVOSDPA_ERROR_NOT_SUPPORTED,
                    "params come from a newer evosdpa header (" + std::to_string(size) +
                        " bytes) and set field bytes this library (" + std::to_string(sizeof(evosdpa_params_t)) +
                        " bytes, version " + evosdpa_version() + ") does not know (byte " + std::to_string(i) + ")");
  }
  evosdpa_params_init_sized(&out, sizeof(evosdpa_params_t));
  std::memcpy(&out, params, std::min(size, sizeof(evosdpa_params_t)));
  out.struct_size = sizeof(evosdpa_params_t);
  return {};
}

Check check_tensor_row_alignment(const TensorView& t, size_t elem_bytes, int64_t bytes) {
  if (t.empty()) return {};
  const int64_t elems = bytes / static_cast<int64_t>(elem_bytes);
  if (reinterpret_cast<uintptr_t>(t.ptr) % bytes != 0)
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED, std::string(t.name) + " is not " + std::to_string(bytes) + "-byte aligned");
  // In elements, not bytes: stride * elem could overflow where stride alone does not.
  for (int d = 0; d < 3; ++d)
    if (t.sizes[d] > 1 && t.strides[d] % elems != 0)
      return fail(EVOSDPA_ERROR_NOT_SUPPORTED, std::string(t.name) + " " + kDimNames[d] + " stride " +
                                                   std::to_string(t.strides[d]) + " is not a multiple of " +
                                                   std::to_string(elems) + " elements (" + std::to_string(bytes) +
                                                   " bytes)");
  return {};
}

Check check_row_alignment(const evosdpa_params_t& p, int64_t bytes) {
  const std::array<TensorView, 4> ts = tensors(p);
  for (const TensorView& t : ts)
    if (Check c = check_tensor_row_alignment(t, &t == &ts[3] ? output_elem_bytes(p) : input_elem_bytes(p), bytes);
        !c.ok())
      return c;
  return {};
}

bool head_dim_supported(int64_t head_dim) { return head_dim == 64 || head_dim == 128; }

bool has_no_queries(const evosdpa_params_t& p) {
  return p.batch == 0 || p.heads_q == 0 || p.seqlen_q == 0 || (p.cu_seqlens_q != nullptr && p.total_q == 0);
}

Check validate_common(const evosdpa_params_t& p) {
  if (input_elem_bytes(p) == 0)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT,
                "dtype " + std::to_string(static_cast<int>(p.dtype)) + " is not an evosdpa_dtype_t value");
  if (Check c = check_fp8_fields(p); !c.ok()) return c;
  if (p.causal != EVOSDPA_CAUSAL_NONE && p.causal != EVOSDPA_CAUSAL_TOP_LEFT &&
      p.causal != EVOSDPA_CAUSAL_BOTTOM_RIGHT)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT,
                "causal " + std::to_string(static_cast<int>(p.causal)) + " is not an evosdpa_causal_t value");

  const std::pair<const char*, int64_t> sizes[] = {{"batch", p.batch},       {"heads_q", p.heads_q},
                                                   {"heads_kv", p.heads_kv}, {"seqlen_q", p.seqlen_q},
                                                   {"seqlen_k", p.seqlen_k}, {"head_dim", p.head_dim}};
  for (const auto& [name, value] : sizes) {
    if (value < 0)
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(name) + " is negative (" + std::to_string(value) + ")");
    if (value > INT32_MAX)
      return fail(EVOSDPA_ERROR_NOT_SUPPORTED,
                  std::string(name) + " = " + std::to_string(value) + " exceeds 2^31-1");
  }
  for (const auto& [name, value] : {std::pair{"seqlen_q", p.seqlen_q}, std::pair{"seqlen_k", p.seqlen_k}})
    if (value > EVOSDPA_MAX_SEQLEN)
      return fail(EVOSDPA_ERROR_NOT_SUPPORTED, std::string(name) + " = " + std::to_string(value) +
                                                   " exceeds EVOSDPA_MAX_SEQLEN (2^30)");
  if (!head_dim_supported(p.head_dim))
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED,
                "head_dim " + std::to_string(p.head_dim) + " is not supported (supported: 64, 128)");
  if (p.heads_q > 0 && p.heads_kv == 0)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "heads_kv is 0 while heads_q is " + std::to_string(p.heads_q));
  if (p.heads_kv > 0 && p.heads_q % p.heads_kv != 0)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "heads_q (" + std::to_string(p.heads_q) +
                                                    ") is not a multiple of heads_kv (" +
                                                    std::to_string(p.heads_kv) + ")");
  if (Check c = check_kv_cache_fields(p); !c.ok()) return c;
  if (Check c = check_varlen_fields(p); !c.ok()) return c;
  if (Check c = check_score_mod_fields(p); !c.ok()) return c;
  if (std::isinf(p.softmax_scale))
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "softmax_scale is infinite (NaN asks for 1/sqrt(head_dim))");
  // The kernels scale in the log2 domain: scale * log2(e) must be a float (3e38 gave NaN on every kernel).
  if (std::fabs(static_cast<double>(p.softmax_scale)) * kLog2e > std::numeric_limits<float>::max())
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "softmax_scale " + std::to_string(p.softmax_scale) +
                                                    " is too large: scale * log2(e) overflows float (|scale| <= "
                                                    "about 2.36e38)");

  const std::array<TensorView, 4> ts = tensors(p);
  for (const TensorView& t : ts)
    if (Check c = check_tensor(t, &t == &ts[3] ? output_elem_bytes(p) : input_elem_bytes(p)); !c.ok()) return c;
  return {};
}

TensorView lse_view(const evosdpa_params_t& p) {
  if (p.cu_seqlens_q != nullptr) return {"lse", p.lse, {1, p.heads_q, p.total_q, 1}, {0, p.total_q, 1, 1}};
  return {"lse", p.lse, {p.batch, p.heads_q, p.seqlen_q, 1}, {p.heads_q * p.seqlen_q, p.seqlen_q, 1, 1}};
}

std::array<std::pair<const char*, ByteSpan>, kForwardInputs + 2> forward_spans(const evosdpa_params_t& p) {
  const std::array<TensorView, 4> ts = tensors(p);
  const std::array<TensorView, 3> ds = descales(p);
  const std::array<TensorView, 2> kv = kv_cache_index_views(p);
  const std::array<TensorView, 2> cu = varlen_index_views(p);
  std::array<std::pair<const char*, ByteSpan>, kForwardInputs + 2> spans{};
  for (int t = 0; t < 3; ++t) spans[t] = {ts[t].name, byte_span(ts[t], input_elem_bytes(p))};
  for (int t = 0; t < 3; ++t) spans[3 + t] = {ds[t].name, byte_span(ds[t], 4)};
  for (int t = 0; t < 2; ++t) spans[6 + t] = {kv[t].name, byte_span(kv[t], 4)};
  for (int t = 0; t < 2; ++t) spans[8 + t] = {cu[t].name, byte_span(cu[t], 4)};
  spans[10] = {"mask", byte_span(mask_view(p), mask_elem_bytes(p))};
  spans[11] = {"alibi_slopes", byte_span(alibi_view(p), sizeof(float))};
  spans[kForwardInputs] = {"o", byte_span(ts[3], output_elem_bytes(p))};
  spans[kForwardInputs + 1] = {"lse", has_no_queries(p) || p.lse == nullptr ? ByteSpan{} : byte_span(lse_view(p), 4)};
  return spans;
}

Check validate_params(const evosdpa_params_t& p) {
  if (Check c = validate_common(p); !c.ok()) return c;
  const std::array<TensorView, 4> ts = tensors(p);
  const TensorView& o = ts[3];
  if (!o.empty() && self_overlapping(o))
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT,
                "o strides make distinct output elements overlap (batch " + std::to_string(o.strides[0]) +
                    ", head " + std::to_string(o.strides[1]) + ", seq " + std::to_string(o.strides[2]) + ")");
  if (p.lse != nullptr && reinterpret_cast<uintptr_t>(p.lse) % 4 != 0)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "lse is not 4-byte aligned");

  // Outputs must not share bytes with the inputs (the descales and the KV-cache indices included) or with
  // each other (byte spans, so an output interleaved between input elements is refused too).
  const auto spans = forward_spans(p);
  const ByteSpan out_spans[2] = {spans[kForwardInputs].second, spans[kForwardInputs + 1].second};
  const char* const out_names[2] = {"o", "lse"};
  for (int i = 0; i < 2; ++i) {
    for (int in = 0; in < kForwardInputs; ++in)
      if (const auto& [name, span] = spans[in]; out_spans[i].intersects(span))
        return fail(EVOSDPA_ERROR_INVALID_ARGUMENT,
                    std::string(out_names[i]) + " (bytes " + hex(out_spans[i].first) + ".." + hex(out_spans[i].last) +
                        ") overlaps input " + name + " (from " + hex(span.first) + "); outputs must not alias inputs");
  }
  if (out_spans[0].intersects(out_spans[1]))
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "o and lse overlap");
  return {};
}

}  // namespace evosdpa::detail
