// Variable-length (packed) batches without a GPU: validation of cu_seqlens_q / cu_seqlens_k, the totals
// and the packed tensors' strides, the extents the alias checks use, which family "auto" and each
// family by name give such calls, and the Hopper family's work counter.
#include <gtest/gtest.h>

#include <string>

#include "cpu/params_fixture.hpp"
#include "cpu/selection_fixture.hpp"

using namespace evosdpa::detail;

namespace {

const auto kCuQ = reinterpret_cast<const int32_t*>(uintptr_t{0x50000000});
const auto kCuK = reinterpret_cast<const int32_t*>(uintptr_t{0x60000000});

// 4 packed sequences of at most 1000 queries and keys, 3000 rows in all, 16 query heads on 4 K/V heads,
// [total, heads, D] (FlashAttention's varlen layout).
evosdpa_params_t packed(int64_t d = 128) {
  evosdpa_params_t p = valid_params(4, 16, 1000, 1000, d);
  p.heads_kv = 4;
  p.cu_seqlens_q = kCuQ;
  p.cu_seqlens_k = kCuK;
  p.total_q = p.total_k = 3000;
  evosdpa_params_set_bshd_strides(&p);
  return p;
}

TEST(VarlenValidation, PackedBatchIsValidAndViewedAsItsRows) {
  const evosdpa_params_t p = packed();
  const Check c = validate_params(p);
  ASSERT_TRUE(c.ok()) << c.message;
  EXPECT_EQ(p.q_batch_stride, 0);
  EXPECT_EQ(p.q_seq_stride, 16 * 128);
  const std::array<TensorView, 4> ts = tensors(p);
  for (const TensorView& t : ts) {
    EXPECT_EQ(t.sizes[0], 1) << t.name;
    EXPECT_EQ(t.sizes[2], 3000) << t.name;  // total rows, not batch x longest
  }
  // The lse is [heads_q, total_q].
  const TensorView lse = lse_view(p);
  EXPECT_EQ(lse.sizes[1], 16);
  EXPECT_EQ(lse.sizes[2], 3000);
  EXPECT_EQ(lse.strides[1], 3000);
}

TEST(VarlenValidation, RefusesBadFields) {
  struct Bad {
    const char* what;
    void (*edit)(evosdpa_params_t&);
    const char* says;
  };
  const Bad bad[] = {
      {"misaligned cu_seqlens_q", [](evosdpa_params_t& p) { p.cu_seqlens_q = reinterpret_cast<const int32_t*>(uintptr_t{0x50000002}); }, "cu_seqlens_q"},
      {"misaligned cu_seqlens_k", [](evosdpa_params_t& p) { p.cu_seqlens_k = reinterpret_cast<const int32_t*>(uintptr_t{0x60000001}); }, "cu_seqlens_k"},
      {"negative total_q", [](evosdpa_params_t& p) { p.total_q = -1; }, "total_q"},
      {"total_k past 2^31", [](evosdpa_params_t& p) { p.total_k = int64_t{1} << 31; }, "total_k"},
      {"total_q without cu_seqlens_q", [](evosdpa_params_t& p) { p.cu_seqlens_q = nullptr; p.q_batch_stride = p.o_batch_stride = 1000 * 16 * 128; }, "total_q"},
      {"q batch stride", [](evosdpa_params_t& p) { p.q_batch_stride = 1000 * 16 * 128; }, "q_batch_stride"},
      {"o batch stride", [](evosdpa_params_t& p) { p.o_batch_stride = 128; }, "o_batch_stride"},
      {"v batch stride", [](evosdpa_params_t& p) { p.v_batch_stride = 128; }, "v_batch_stride"},
      {"with a page table", [](evosdpa_params_t& p) { p.page_table = reinterpret_cast<const int32_t*>(uintptr_t{0x70000000}); p.page_size = 16; p.num_pages = 300; p.page_table_batch_stride = 63; }, "page_table"},
      {"o over cu_seqlens_q", [](evosdpa_params_t& p) { p.o = reinterpret_cast<void*>(uintptr_t{0x50000000 - 16}); }, "cu_seqlens_q"},
      {"lse over cu_seqlens_k", [](evosdpa_params_t& p) { p.lse = reinterpret_cast<float*>(uintptr_t{0x60000000 - 64}); }, "cu_seqlens_k"},
      {"o over the end of q", [](evosdpa_params_t& p) { p.o = const_cast<char*>(static_cast<const char*>(p.q)) + 2 * (3000 * 16 * 128 - 8); }, "overlaps input q"},
  };
  for (const Bad& b : bad) {
    evosdpa_params_t p = packed();
    b.edit(p);
    const Check c = validate_params(p);
    EXPECT_EQ(c.status, EVOSDPA_ERROR_INVALID_ARGUMENT) << b.what << ": " << c.message;
    EXPECT_NE(c.message.find(b.says), std::string::npos) << b.what << ": " << c.message;
  }
}

TEST(VarlenValidation, EitherSideMayBePackedAlone) {
  evosdpa_params_t q_only = packed();
  q_only.cu_seqlens_k = nullptr;
  q_only.total_k = 0;
  evosdpa_params_set_bshd_strides(&q_only);
  EXPECT_NE(q_only.k_batch_stride, 0);
  EXPECT_TRUE(validate_params(q_only).ok()) << validate_params(q_only).message;
  EXPECT_EQ(tensors(q_only)[1].sizes[0], 4);  // padded K: batch x seqlen_k
  evosdpa_params_t k_only = packed();
  k_only.cu_seqlens_q = nullptr;
  k_only.total_q = 0;
  evosdpa_params_set_bhsd_strides(&k_only);
  EXPECT_EQ(k_only.k_head_stride, 3000 * 128);  // packed [H, total, D]
  EXPECT_TRUE(validate_params(k_only).ok()) << validate_params(k_only).message;
}

TEST(VarlenValidation, NoQueriesWhenTotalIsZero) {
  evosdpa_params_t p = packed();
  EXPECT_FALSE(has_no_queries(p));
  p.total_q = 0;
  EXPECT_TRUE(has_no_queries(p));
  EXPECT_TRUE(validate_params(p).ok());
}

TEST(VarlenValidation, BackwardRefusesPackedBatches) {
  evosdpa_params_t p = packed();
  p.lse = reinterpret_cast<float*>(uintptr_t{0x78000000});
  p.dout = p.q;
  const Check c = validate_backward_params(p);
  EXPECT_EQ(c.status, EVOSDPA_ERROR_NOT_SUPPORTED) << c.message;
  EXPECT_NE(c.message.find("forward-only"), std::string::npos) << c.message;
}

TEST(VarlenSelection, DenseFamiliesServeItOthersRefuse) {
  const evosdpa_params_t p = packed();
  const DeviceInfo h100 = device(9, 0);
  EXPECT_EQ(name_of(select_kernel(p, h100, "auto")), "wgmma_sm90");
  EXPECT_EQ(name_of(select_any_arch(p, device(8, 0, 163 * 1024), "auto")), "mma_sm80");
  for (const char* k : {"wgmma_sm90", "mma_sm80", "reference"})
    EXPECT_TRUE(select_kernel(p, h100, k).check.ok()) << k << ": " << select_kernel(p, h100, k).check.message;
  // splitkv_sm80 reads padded caches only, even for decoding rows.
  evosdpa_params_t decode = packed();
  decode.seqlen_q = 1;
  decode.total_q = 4;
  const Selection s = select_kernel(decode, h100, "splitkv_sm80");
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(s.check.message.find("cu_seqlens"), std::string::npos) << s.check.message;
  EXPECT_NE(name_of(select_kernel(decode, h100, "auto")), "splitkv_sm80");
}

// wgmma_sm90 claims the items of sequences with lengths of their own from a counter in the workspace:
// 16 bytes wanted on its persistent grid, used only when the caller gives them; none for padded calls of
// the call's lengths, nor where one item per CTA leaves nothing to balance.
TEST(VarlenSelection, HopperWantsAWorkCounterForSequencesOfTheirOwnLengths) {
  DeviceInfo h100 = device(9, 0);
  h100.sm_count = 132;
  evosdpa_params_t p = packed();  // 4 x 16 heads x 8 blocks of 128 rows: 512 items, the persistent grid
  Selection s = select_kernel(p, h100, "wgmma_sm90");
  ASSERT_TRUE(s.check.ok()) << s.check.message;
  EXPECT_EQ(s.workspace_wanted, 16u);
  EXPECT_EQ(s.workspace_bytes, 0u);  // no workspace: the fixed deal
  p.workspace = reinterpret_cast<void*>(uintptr_t{0x80000000});
  p.workspace_size = 15;
  EXPECT_EQ(select_kernel(p, h100, "wgmma_sm90").workspace_bytes, 0u);
  p.workspace_size = 1 << 20;
  s = select_kernel(p, h100, "auto");
  EXPECT_EQ(name_of(s), "wgmma_sm90");
  EXPECT_EQ(s.workspace_bytes, 16u);
  EXPECT_EQ(s.splits, 1);
  // Padded keys cut by seqused_k: the same.
  evosdpa_params_t used = valid_params(4, 16, 1000, 1000, 128);
  used.seqused_k = kCuK;
  used.workspace = p.workspace;
  used.workspace_size = p.workspace_size;
  EXPECT_EQ(select_kernel(used, h100, "wgmma_sm90").workspace_bytes, 16u);
  // The call's own lengths: nothing.
  evosdpa_params_t dense = valid_params(4, 16, 1000, 1000, 128);
  dense.workspace = p.workspace;
  dense.workspace_size = p.workspace_size;
  EXPECT_EQ(select_kernel(dense, h100, "wgmma_sm90").workspace_wanted, 0u);
  // A grid of less than a wave (here 8 items of 64 rows, split_keys): one item per CTA, nothing wanted.
  evosdpa_params_t few = packed();
  few.heads_q = few.heads_kv = 1;
  few.seqlen_q = few.seqlen_k = 128;
  few.total_q = few.total_k = 512;
  evosdpa_params_set_bshd_strides(&few);
  const Selection f = select_kernel(few, h100, "wgmma_sm90");
  ASSERT_TRUE(f.check.ok()) << f.check.message;
  EXPECT_EQ(f.workspace_wanted, 0u);
}

TEST(VarlenSelection, Fp8PackedBatchesAreRefusedByTheFastFamilies) {
  evosdpa_params_t p = packed();
  p.dtype = EVOSDPA_DTYPE_FLOAT8_E4M3;
  p.o_dtype = EVOSDPA_DTYPE_FLOAT16;
  p.q_descale = p.k_descale = p.v_descale = reinterpret_cast<const float*>(uintptr_t{0x7a000000});
  evosdpa_params_set_bshd_strides(&p);
  for (const char* k : {"wgmma_sm90", "mma_fp8_sm89"}) {
    const Selection s = select_kernel(p, device(9, 0), k);
    EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED) << k;
    EXPECT_NE(s.check.message.find("variable-length"), std::string::npos) << k << ": " << s.check.message;
  }
  EXPECT_EQ(name_of(select_kernel(p, device(9, 0), "auto")), "reference");
}

}  // namespace
