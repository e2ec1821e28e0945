// Argument validation of the KV-cache fields (evosdpa.h, "Serving"): seqused_k, the page table and its
// sizes, num_splits, and the forward's split-KV workspace.
#include <string>

#include "validation.hpp"

namespace evosdpa::detail {

bool uses_kv_cache(const evosdpa_params_t& p) { return p.seqused_k != nullptr || p.page_table != nullptr; }

int64_t page_table_columns(const evosdpa_params_t& p) {
  return p.page_table == nullptr || p.page_size <= 0 ? 0 : (p.seqlen_k + p.page_size - 1) / p.page_size;
}

std::array<TensorView, 2> kv_cache_index_views(const evosdpa_params_t& p) {
  return {{{"seqused_k", p.seqused_k, {p.seqused_k == nullptr ? 0 : p.batch, 1, 1, 1}, {1, 0, 0, 1}},
           {"page_table", p.page_table, {p.batch, 1, 1, page_table_columns(p)}, {p.page_table_batch_stride, 0, 0, 1}}}};
}

Check check_kv_cache_fields(const evosdpa_params_t& p) {
  if (p.num_splits < 0)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "num_splits is negative (" + std::to_string(p.num_splits) +
                                                    "; 0 lets the library choose, 1 asks for no split)");
  if (p.num_splits > INT32_MAX)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "num_splits " + std::to_string(p.num_splits) + " exceeds 2^31-1");
  if (p.seqused_k != nullptr && reinterpret_cast<uintptr_t>(p.seqused_k) % 4 != 0)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "seqused_k is not 4-byte aligned (int32)");
  if (p.page_table == nullptr) {
    // A field meant for a paged cache is never silently ignored.
    if (p.page_size != 0 || p.num_pages != 0 || p.page_table_batch_stride != 0)
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT,
                  "page_size, num_pages or page_table_batch_stride is set but page_table is a null pointer "
                  "(K and V are then dense: leave them 0)");
    return {};
  }
  if (reinterpret_cast<uintptr_t>(p.page_table) % 4 != 0)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "page_table is not 4-byte aligned (int32)");
  if (p.page_size <= 0 || p.page_size % 16 != 0 || p.page_size > INT32_MAX)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "page_size " + std::to_string(p.page_size) +
                                                    " is not a positive multiple of 16 below 2^31 (keys per page)");
  if (p.num_pages < 0 || p.num_pages > INT32_MAX)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "num_pages " + std::to_string(p.num_pages) + " is not in [0, 2^31-1]");
  if (p.seqlen_k > 0 && p.batch > 0 && p.num_pages == 0)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "num_pages is 0 but seqlen_k is " + std::to_string(p.seqlen_k) +
                                                    ": a paged cache with keys has pages");
  const int64_t columns = page_table_columns(p);
  if (p.batch > 1 && p.page_table_batch_stride < columns)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT,
                "page_table_batch_stride " + std::to_string(p.page_table_batch_stride) + " is below the " +
                    std::to_string(columns) + " pages a sequence of seqlen_k " + std::to_string(p.seqlen_k) +
                    " keys needs (ceil(seqlen_k / page_size)): the rows of the table would overlap");
  for (const TensorView& t : kv_cache_index_views(p))
    if (!t.empty() && !max_offset(t))
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(t.name) + " strides overflow a 64-bit offset");
  return {};
}

Check check_no_splits(const evosdpa_params_t& p) {
  if (p.num_splits > 1)
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED, "num_splits " + std::to_string(p.num_splits) +
                                                 " asks for split keys, which only splitkv_sm80 computes");
  return {};
}

Check check_no_page_table(const evosdpa_params_t& p) {
  if (p.page_table != nullptr)
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED, "a paged KV cache (page_table) is not supported (splitkv_sm80 and reference read it)");
  return check_no_splits(p);
}

Check check_no_kv_cache(const evosdpa_params_t& p) {
  if (Check c = check_no_page_table(p); !c.ok()) return c;
  if (p.seqused_k != nullptr)
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED,
                "per-sequence key counts (seqused_k) are not supported (splitkv_sm80, wgmma_sm90, mma_sm80 and "
                "reference read them)");
  return {};
}

Check check_forward_workspace(const evosdpa_params_t& p, size_t needed) {
  if (needed == 0) return {};
  if (p.workspace_size < needed)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "workspace_size " + std::to_string(p.workspace_size) +
                                                    " is below the " + std::to_string(needed) +
                                                    " bytes the kernel uses (evosdpa_forward_workspace_size)");
  if (p.workspace == nullptr) return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "workspace is a null pointer");
  if (reinterpret_cast<uintptr_t>(p.workspace) % kWorkspaceAlignment != 0)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT,
                "workspace is not " + std::to_string(kWorkspaceAlignment) + "-byte aligned");
  const ByteSpan ws = byte_span(TensorView{"workspace", p.workspace, {1, 1, 1, static_cast<int64_t>(needed)}, {0, 0, 0, 1}}, 1);
  for (const auto& [name, span] : forward_spans(p))
    if (ws.intersects(span))
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "workspace (bytes " + hex(ws.first) + ".." + hex(ws.last) +
                                                      ") overlaps " + name + " (from " + hex(span.first) + ")");
  return {};
}

}  // namespace evosdpa::detail
