#include "selection.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/mma/mma_config.hpp"

namespace evosdpa::detail {
namespace {

Check fail(evosdpa_status_t status, std::string message) { return Check{status, std::move(message)}; }

constexpr int kReferenceMaxHeadDim = 256;
constexpr int kReferenceRowsPerBlock = 4;  // kWarpsPerBlock in kernels/reference/reference.cu
constexpr long long kMaxGridX = INT32_MAX;

struct TensorView {
  const char* name;
  const void* ptr;
  int64_t sizes[4];
  int64_t strides[4];  // elements; the last is the contiguous head_dim
  bool empty() const { return sizes[0] * sizes[1] * sizes[2] * sizes[3] == 0; }
};

std::array<TensorView, 4> tensors(const evosdpa_params_t& p) {
  return {{
      {"q", p.q, {p.batch, p.heads_q, p.seqlen_q, p.head_dim}, {p.q_batch_stride, p.q_head_stride, p.q_seq_stride, 1}},
      {"k", p.k, {p.batch, p.heads_kv, p.seqlen_k, p.head_dim}, {p.k_batch_stride, p.k_head_stride, p.k_seq_stride, 1}},
      {"v", p.v, {p.batch, p.heads_kv, p.seqlen_k, p.head_dim}, {p.v_batch_stride, p.v_head_stride, p.v_seq_stride, 1}},
      {"o", p.o, {p.batch, p.heads_q, p.seqlen_q, p.head_dim}, {p.o_batch_stride, p.o_head_stride, p.o_seq_stride, 1}},
  }};
}

const char* const kDimNames[4] = {"batch", "head", "seq", "head_dim"};

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

}  // namespace

const char* kernel_name(KernelId id) {
  switch (id) {
    case KernelId::MmaSm80: return "mma_sm80";
    case KernelId::Reference: return "reference";
  }
  return "unknown";
}

std::optional<KernelId> kernel_from_name(std::string_view name) {
  for (int i = 0; i < kKernelCount; ++i)
    if (name == kernel_name(static_cast<KernelId>(i))) return static_cast<KernelId>(i);
  return std::nullopt;
}

bool head_dim_supported(int64_t head_dim) { return head_dim == 64 || head_dim == 128; }

bool has_no_queries(const evosdpa_params_t& p) { return p.batch == 0 || p.heads_q == 0 || p.seqlen_q == 0; }

Check validate_params(const evosdpa_params_t& p) {
  if (p.dtype != EVOSDPA_DTYPE_FLOAT16 && p.dtype != EVOSDPA_DTYPE_BFLOAT16)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT,
                "dtype " + std::to_string(static_cast<int>(p.dtype)) + " is not an evosdpa_dtype_t value");
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
  if (!head_dim_supported(p.head_dim))
    return fail(EVOSDPA_ERROR_NOT_SUPPORTED,
                "head_dim " + std::to_string(p.head_dim) + " is not supported (supported: 64, 128)");
  if (p.heads_q > 0 && p.heads_kv == 0)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "heads_kv is 0 while heads_q is " + std::to_string(p.heads_q));
  if (p.heads_kv > 0 && p.heads_q % p.heads_kv != 0)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "heads_q (" + std::to_string(p.heads_q) +
                                                    ") is not a multiple of heads_kv (" +
                                                    std::to_string(p.heads_kv) + ")");
  if (!std::isfinite(p.softmax_scale))
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "softmax_scale is not finite");

  for (const TensorView& t : tensors(p)) {
    for (int d = 0; d < 3; ++d)
      if (t.strides[d] < 0)
        return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(t.name) + " " + kDimNames[d] +
                                                        " stride is negative (" + std::to_string(t.strides[d]) + ")");
    if (t.empty()) continue;
    if (t.ptr == nullptr) return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(t.name) + " is a null pointer");
    if (reinterpret_cast<uintptr_t>(t.ptr) % 2 != 0)
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT,
                  std::string(t.name) + " is not aligned to its 2-byte element size");
    if (!max_offset(t))
      return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, std::string(t.name) + " strides overflow a 64-bit offset");
  }
  const TensorView o = tensors(p)[3];
  if (!o.empty() && self_overlapping(o))
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT,
                "o strides make distinct output elements overlap (batch " + std::to_string(o.strides[0]) +
                    ", head " + std::to_string(o.strides[1]) + ", seq " + std::to_string(o.strides[2]) + ")");
  if (p.lse != nullptr && reinterpret_cast<uintptr_t>(p.lse) % 4 != 0)
    return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "lse is not 4-byte aligned");
  return {};
}

Check kernel_supports(KernelId id, const evosdpa_params_t& p, const DeviceInfo& dev) {
  const std::string who = std::string(kernel_name(id)) + ": ";
  switch (id) {
    case KernelId::MmaSm80: {
      if (dev.cc_major < 8)
        return fail(EVOSDPA_ERROR_NOT_SUPPORTED, who + "needs sm_80 or newer");
      const int variant = mma_sm80_variant(p, dev);
      if (variant < 0)
        return fail(EVOSDPA_ERROR_NOT_SUPPORTED, who + "no tile configuration for head_dim " + std::to_string(p.head_dim));
      const mma_sm80::TileConfig* cfg = &mma_sm80::kConfigs[variant];
      if (cfg->smem_bytes() > dev.max_smem_per_block_optin)
        return fail(EVOSDPA_ERROR_NOT_SUPPORTED, who + "needs " + std::to_string(cfg->smem_bytes()) +
                                                     " bytes of shared memory per block, the device allows " +
                                                     std::to_string(dev.max_smem_per_block_optin));
      for (const TensorView& t : tensors(p)) {
        if (t.empty()) continue;
        if (reinterpret_cast<uintptr_t>(t.ptr) % 16 != 0)
          return fail(EVOSDPA_ERROR_NOT_SUPPORTED, who + std::string(t.name) + " is not 16-byte aligned");
        for (int d = 0; d < 3; ++d)
          if (t.sizes[d] > 1 && t.strides[d] % 8 != 0)
            return fail(EVOSDPA_ERROR_NOT_SUPPORTED, who + std::string(t.name) + " " + kDimNames[d] + " stride " +
                                                         std::to_string(t.strides[d]) +
                                                         " is not a multiple of 8 elements (16 bytes)");
      }
      const long long q_blocks = (p.seqlen_q + cfg->block_m() - 1) / cfg->block_m();
      if (static_cast<__int128>(q_blocks) * p.batch * p.heads_q > kMaxGridX)
        return fail(EVOSDPA_ERROR_NOT_SUPPORTED, who + "batch * heads_q * ceil(seqlen_q / " +
                                                     std::to_string(cfg->block_m()) + ") exceeds 2^31-1 blocks");
      return {};
    }
    case KernelId::Reference: {
      if (dev.cc_major < 8) return fail(EVOSDPA_ERROR_NOT_SUPPORTED, who + "needs sm_80 or newer");
      if (p.head_dim > kReferenceMaxHeadDim)
        return fail(EVOSDPA_ERROR_NOT_SUPPORTED, who + "head_dim above " + std::to_string(kReferenceMaxHeadDim));
      const __int128 rows = static_cast<__int128>(p.batch) * p.heads_q * p.seqlen_q;
      if ((rows + kReferenceRowsPerBlock - 1) / kReferenceRowsPerBlock > kMaxGridX)
        return fail(EVOSDPA_ERROR_NOT_SUPPORTED, who + "batch * heads_q * seqlen_q exceeds " +
                                                     std::to_string(kMaxGridX * kReferenceRowsPerBlock) + " rows");
      return {};
    }
  }
  return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "unknown kernel id " + std::to_string(static_cast<int>(id)));
}

bool is_auto(const char* requested) {
  return requested == nullptr || requested[0] == '\0' || std::string_view(requested) == "auto";
}

Check check_kernel_name(const char* requested) {
  if (is_auto(requested) || kernel_from_name(requested)) return {};
  std::string names;
  for (int i = 0; i < kKernelCount; ++i) names += std::string(", ") + kernel_name(static_cast<KernelId>(i));
  return fail(EVOSDPA_ERROR_INVALID_ARGUMENT, "unknown kernel \"" + std::string(requested) + "\" (known: auto" + names + ")");
}

int mma_sm80_variant(const evosdpa_params_t& p, const DeviceInfo& dev) {
  return mma_sm80::choose_config(static_cast<int>(p.head_dim), p.batch * p.heads_q, p.seqlen_q, dev.sm_count);
}

Selection select_kernel(const evosdpa_params_t& p, const DeviceInfo& dev, const char* requested) {
  if (Check c = check_kernel_name(requested); !c.ok()) return {c};
  const std::optional<KernelId> named = is_auto(requested) ? std::nullopt : kernel_from_name(requested);
  if (Check c = validate_params(p); !c.ok()) return {c};
  if (dev.cc_major < 8)
    return {fail(EVOSDPA_ERROR_DEVICE, "device " + std::to_string(dev.ordinal) + " has compute capability " +
                                           std::to_string(dev.cc_major) + "." + std::to_string(dev.cc_minor) +
                                           "; evosdpa needs 8.0 (sm_80) or newer")};
  auto selection = [&](Check c, KernelId id) {
    return Selection{std::move(c), id, id == KernelId::MmaSm80 ? mma_sm80_variant(p, dev) : 0};
  };
  if (named) return selection(kernel_supports(*named, p, dev), *named);
  std::string reasons;
  for (int i = 0; i < kKernelCount; ++i) {
    const auto id = static_cast<KernelId>(i);
    Check c = kernel_supports(id, p, dev);
    if (c.ok()) return selection(std::move(c), id);
    reasons += (reasons.empty() ? "" : "; ") + c.message;
  }
  return {fail(EVOSDPA_ERROR_NOT_SUPPORTED, "no kernel supports these arguments: " + reasons)};
}

}  // namespace evosdpa::detail
