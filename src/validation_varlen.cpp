// Argument validation of variable-length (packed) batches (evosdpa.h, "Variable-length batches"):
// cu_seqlens_q / cu_seqlens_k, the totals, and the packed tensors' batch strides.
#include <string>

#include "validation.hpp"

namespace evosdpa::detail {
namespace {

// One side's fields (queries or keys): the pointer, its total, and the batch strides of its packed tensors.
struct PackedSide {
  const char* cu_name;
  const int32_t* cu;
  const char* total_name;
  int64_t total;
  std::pair<const char*, int64_t> batch_strides[2];
};

Check check_side(const PackedSide& s) {
  if (s.cu == nullptr) {
    if (s.total != 0)
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(s.total_name) + " is " + std::to_string(s.total) +
                                                      " but " + s.cu_name +
                                                      " is a null pointer (the tensors are then padded: leave it 0)");
    return {};
  }
  if (reinterpret_cast<uintptr_t>(s.cu) % 4 != 0)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(s.cu_name) + " is not 4-byte aligned (int32)");
  if (s.total < 0 || s.total > INT32_MAX)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT,
                std::string(s.total_name) + " " + std::to_string(s.total) + " is not in [0, 2^31-1]");
  for (const auto& [name, stride] : s.batch_strides)
    if (stride != 0)
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(name) + " is " + std::to_string(stride) + " but " +
                                                      s.cu_name + " packs the sequences one after another: it must be 0");
  return {};
}

}  // namespace

bool uses_varlen(const evosdpa_params_t& p) { return p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr; }

std::array<TensorView, 2> varlen_index_views(const evosdpa_params_t& p) {
  const auto entries = [&](const int32_t* cu) { return cu == nullptr ? int64_t{0} : p.batch + 1; };
  return {{{"cu_seqlens_q", p.cu_seqlens_q, {1, 1, 1, entries(p.cu_seqlens_q)}, {0, 0, 0, 1}},
           {"cu_seqlens_k", p.cu_seqlens_k, {1, 1, 1, entries(p.cu_seqlens_k)}, {0, 0, 0, 1}}}};
}

Check check_varlen_fields(const evosdpa_params_t& p) {
  const PackedSide sides[2] = {
      {"cu_seqlens_q", p.cu_seqlens_q, "total_q", p.total_q,
       {{"q_batch_stride", p.q_batch_stride}, {"o_batch_stride", p.o_batch_stride}}},
      {"cu_seqlens_k", p.cu_seqlens_k, "total_k", p.total_k,
       {{"k_batch_stride", p.k_batch_stride}, {"v_batch_stride", p.v_batch_stride}}}};
  for (const PackedSide& s : sides)
    if (Check c = check_side(s); !c.ok()) return c;
  if (p.cu_seqlens_k != nullptr && p.page_table != nullptr)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT,
                "cu_seqlens_k and page_table are both set: a paged cache is addressed through its table "
                "(seqused_k gives each sequence's length there)");
  return {};
}

Check check_no_varlen(const evosdpa_params_t& p) {
  if (uses_varlen(p))
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED,
                "variable-length batches (cu_seqlens_q, cu_seqlens_k) are not supported (wgmma_sm90, mma_sm80 "
                "and reference read them)");
  return {};
}

}  // namespace evosdpa::detail
