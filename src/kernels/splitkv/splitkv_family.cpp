// The split-KV family in the registry (splitkv_sm80): what it supports (fp16/bf16, D 64/128, dense or
// paged K/V, per-sequence key counts), how many parts it splits the keys into within the caller's
// workspace, and its entry points.
#include <cstdint>
#include <string>

#include "kernels/family.hpp"
#include "kernels/splitkv/splitkv_config.hpp"
#include "kernels/splitkv/splitkv_dispatch.hpp"

#ifndef EVOSDPA_CUDA_ARCHS
#error "EVOSDPA_CUDA_ARCHS (the CUDA targets this family's kernels are compiled for) is set by src/sources.cmake"
#endif

namespace evosdpa::detail {
namespace {

// cp.async copies and the output stores move 16-byte chunks: every row start must be 16-byte aligned.
constexpr int64_t kChunkBytes = 16;
constexpr long long kMaxGridX = INT32_MAX;
// Queries per sequence up to which "auto" takes a dense call (a decoding step).
constexpr int64_t kDecodeRows = 16;

FamilySupport supports(const evosdpa_params_t& p, const DeviceInfo& dev) {
  const std::string who = "splitkv_sm80: ";
  const auto refuse = [&who](std::string message) {
    return FamilySupport{fail(EVOSDPA_ERROR_NOT_SUPPORTED, who + std::move(message))};
  };
  if (p.dtype != EVOSDPA_DTYPE_FLOAT16 && p.dtype != EVOSDPA_DTYPE_BFLOAT16)
    return refuse(p.dtype == EVOSDPA_DTYPE_FLOAT8_E4M3 ? std::string("FP8 (E4M3) inputs are not supported (fp16, bf16)")
                                                        : "dtype " + std::to_string(static_cast<int>(p.dtype)) + " (fp16, bf16)");
  const int elem = static_cast<int>(evosdpa_dtype_size(p.dtype));
  const int head_dim = p.head_dim == 64 || p.head_dim == 128 ? static_cast<int>(p.head_dim) : 0;
  const bool sm90a = dev.cc_major == 9 && dev.cc_minor == 0;
  const int smallest = splitkv::config_for(head_dim, false, 99 * 1024, elem);  // the sm_86/sm_89 row
  if (smallest < 0) return refuse("no configuration for head_dim " + std::to_string(p.head_dim));
  if (const Check c = check_no_varlen(p); !c.ok()) return refuse(c.message);
  if (const Check c = check_no_score_mods(p); !c.ok()) return refuse(c.message);
  const int64_t group = p.heads_kv > 0 ? p.heads_q / p.heads_kv : 1;
  const long long base = splitkv::base_blocks(p.batch, p.heads_kv, p.seqlen_q, group);
  if (const Check c = check_row_alignment(p, kChunkBytes); !c.ok()) return refuse(c.message);
  // Packed rows (query, query head of the group) are ints in the kernel, with a 16-row group added.
  if (static_cast<__int128>(p.seqlen_q) * group > INT32_MAX - splitkv::kBlockRows)
    return refuse("seqlen_q * heads_q / heads_kv exceeds 2^31-17 packed rows");

  // The row and its key parts (splitkv::plan_call): the caller's count, or the library's within the
  // workspace given (none without a pointer: "none without one", evosdpa.h).
  const long long rows = static_cast<long long>(p.batch) * p.heads_q * p.seqlen_q;
  const long long per_split_bytes = splitkv::workspace_bytes(2, rows, p.head_dim) / 2;
  const size_t given = p.workspace != nullptr ? p.workspace_size : 0;
  const long long fit = per_split_bytes > 0 ? static_cast<long long>(given / static_cast<size_t>(per_split_bytes)) : 0;
  const splitkv::CallPlan plan =
      splitkv::plan_call(head_dim, sm90a, dev.max_smem_per_block_optin, elem, dev.sm_count, p.seqlen_k, base,
                         p.page_table != nullptr, p.num_splits > 0 ? p.num_splits : 0, fit);
  if (plan.row < 0)
    return refuse("needs " + std::to_string(splitkv::kConfigs[smallest].smem_bytes(elem)) +
                  " bytes of shared memory per block, the device allows " + std::to_string(dev.max_smem_per_block_optin));
  const long long splits = plan.splits, wanted = plan.wanted;
  if (static_cast<__int128>(base) * (splits > wanted ? splits : wanted) > kMaxGridX)
    return refuse("batch * heads_kv * ceil(seqlen_q * heads_q / heads_kv / 16) * splits exceeds 2^31-1 blocks");
  // The merge's grid (splitkv_launch.cuh): 4 output rows per block.
  if (splits > 1 && (rows + 3) / 4 > kMaxGridX) return refuse("batch * heads_q * seqlen_q exceeds 2^33-4 merged rows");
  FamilySupport s{{}, plan.row};
  s.splits = static_cast<int>(splits);
  s.workspace_bytes = static_cast<size_t>(splitkv::workspace_bytes(splits, rows, p.head_dim));
  s.workspace_wanted = static_cast<size_t>(splitkv::workspace_bytes(wanted, rows, p.head_dim));
  return s;
}

// Decoding shapes (issue 12's: 1 to 16 new tokens per sequence, whatever the group) and paged caches,
// which no other fast family serves. Longer rows against a dense cache with seqused_k (a chunk of
// prefill) go to the dense kernels, whose tiles are built for them.
bool auto_prefers(const evosdpa_params_t& p, const DeviceInfo&) {
  return p.page_table != nullptr || p.seqlen_q <= kDecodeRows;
}

}  // namespace

extern const KernelFamily kSplitKvSm80Family = {"splitkv_sm80", EVOSDPA_CUDA_ARCHS, supports, splitkv::launch_variant,
                                                splitkv::probe_image, auto_prefers, nullptr};

}  // namespace evosdpa::detail
