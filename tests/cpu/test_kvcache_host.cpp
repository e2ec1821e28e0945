// KV-cache arguments without a GPU: validation of seqused_k, the page table and num_splits, which
// family "auto" and each family by name give such calls, and splitkv_sm80's split counts and workspace.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <tuple>

#include "cpu/params_fixture.hpp"
#include "cpu/selection_fixture.hpp"
#include "kernels/splitkv/splitkv_config.hpp"

using namespace evosdpa::detail;

namespace {

const auto kSeqused = reinterpret_cast<const int32_t*>(uintptr_t{0x50000000});
const auto kTable = reinterpret_cast<const int32_t*>(uintptr_t{0x60000000});

// A decode step: 4 sequences, 32 query heads on 8 K/V heads, one new token, a paged cache of 64 pages of
// 16 keys ([pages, page, heads_kv, D]) with room for 256 keys per sequence.
evosdpa_params_t paged_decode(int64_t d = 128) {
  evosdpa_params_t p = valid_params(4, 32, 1, 256, d);
  p.heads_kv = 8;
  evosdpa_params_set_bshd_strides(&p);
  p.k_head_stride = p.v_head_stride = d;
  p.k_seq_stride = p.v_seq_stride = 8 * d;
  p.k_batch_stride = p.v_batch_stride = 16 * 8 * d;
  p.seqused_k = kSeqused;
  p.page_table = kTable;
  p.page_table_batch_stride = 16;
  p.page_size = 16;
  p.num_pages = 64;
  return p;
}

TEST(KvCacheValidation, PagedDecodeIsValid) {
  const Check c = validate_params(paged_decode());
  EXPECT_TRUE(c.ok()) << c.message;
}

TEST(KvCacheValidation, RefusesBadFields) {
  struct Bad {
    const char* what;
    void (*edit)(evosdpa_params_t&);
    const char* says;
  };
  const Bad bad[] = {
      {"page size 24", [](evosdpa_params_t& p) { p.page_size = 24; }, "multiple of 16"},
      {"page size 0", [](evosdpa_params_t& p) { p.page_size = 0; }, "multiple of 16"},
      {"no pages", [](evosdpa_params_t& p) { p.num_pages = 0; }, "num_pages is 0"},
      {"negative pages", [](evosdpa_params_t& p) { p.num_pages = -1; }, "num_pages"},
      {"table rows overlap", [](evosdpa_params_t& p) { p.page_table_batch_stride = 15; }, "page_table_batch_stride"},
      {"paging fields without a table", [](evosdpa_params_t& p) { p.page_table = nullptr; }, "page_table is a null"},
      {"misaligned seqused_k", [](evosdpa_params_t& p) { p.seqused_k = reinterpret_cast<const int32_t*>(uintptr_t{0x50000002}); }, "seqused_k"},
      {"misaligned table", [](evosdpa_params_t& p) { p.page_table = reinterpret_cast<const int32_t*>(uintptr_t{0x60000001}); }, "page_table"},
      {"negative splits", [](evosdpa_params_t& p) { p.num_splits = -2; }, "num_splits"},
      {"o over the table", [](evosdpa_params_t& p) { p.o = reinterpret_cast<void*>(uintptr_t{0x60000000}); }, "page_table"},
      {"lse over seqused_k", [](evosdpa_params_t& p) { p.lse = reinterpret_cast<float*>(uintptr_t{0x50000008}); }, "seqused_k"},
  };
  for (const Bad& b : bad) {
    evosdpa_params_t p = paged_decode();
    b.edit(p);
    const Check c = validate_params(p);
    EXPECT_EQ(c.status, EVOSDPA_ERROR_INVALID_ARGUMENT) << b.what << ": " << c.message;
    EXPECT_NE(c.message.find(b.says), std::string::npos) << b.what << ": " << c.message;
  }
}

TEST(KvCacheValidation, PagedKAndVAreCheckedAsTheirPages) {
  // The cache's extent is num_pages pages: its strides are checked over them, not over batch x seqlen_k.
  evosdpa_params_t p = paged_decode();
  const std::array<TensorView, 4> ts = tensors(p);
  EXPECT_EQ(ts[1].sizes[0], 64);
  EXPECT_EQ(ts[1].sizes[2], 16);
  p.k_seq_stride = 1;  // rows of a page overlap: harmless for an input, but must be 16-byte rows for splitkv
  Selection s = select_kernel(p, device(9, 0), "splitkv_sm80");
  EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED) << s.check.message;
}

TEST(KvCacheValidation, BackwardRefusesACache) {
  evosdpa_params_t p = paged_decode();
  p.dout = p.q;
  p.dq = reinterpret_cast<void*>(uintptr_t{0x70000000});
  const Check c = validate_backward_params(p);
  EXPECT_EQ(c.status, EVOSDPA_ERROR_NOT_SUPPORTED) << c.message;
  EXPECT_NE(c.message.find("forward-only"), std::string::npos) << c.message;
}

TEST(KvCacheSelection, AutoTakesSplitKvAndOthersRefuseByName) {
  for (auto dev : {device(8, 0, 163 * 1024), device(8, 9, 99 * 1024), device(9, 0)}) {
    const evosdpa_params_t p = paged_decode();
    EXPECT_EQ(name_of(select_any_arch(p, dev, "auto")), "splitkv_sm80");
    EXPECT_EQ(name_of(select_any_arch(p, dev, "reference")), "reference");
    for (const char* other : {"mma_sm80", "wgmma_sm90"}) {
      if (std::string(other) == "wgmma_sm90" && dev.cc_major != 9) continue;  // refuses the device first
      const Selection s = select_any_arch(p, dev, other);
      EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED) << other;
      EXPECT_NE(s.check.message.find("page_table"), std::string::npos) << s.check.message;
    }
    // Per-sequence key counts of a dense cache: decoding rows go to splitkv_sm80, a chunk of prefill to
    // the dense kernels, which read seqused_k too.
    evosdpa_params_t seqused_only = valid_params(2, 8, 1, 512, 64);
    seqused_only.seqused_k = kSeqused;
    EXPECT_EQ(name_of(select_any_arch(seqused_only, dev, "auto")), "splitkv_sm80");
    const Selection mma = select_any_arch(seqused_only, dev, "mma_sm80");
    EXPECT_TRUE(mma.check.ok()) << mma.check.message;
    seqused_only.seqlen_q = 600;
    evosdpa_params_set_bhsd_strides(&seqused_only);
    EXPECT_NE(name_of(select_any_arch(seqused_only, dev, "auto")), "splitkv_sm80");
  }
}

TEST(KvCacheSelection, DecodeShapesGoToSplitKvPrefillDoesNot) {
  const DeviceInfo h100 = device(9, 0);
  evosdpa_params_t decode = valid_params(8, 32, 1, 8192, 128);
  decode.heads_kv = 8;
  evosdpa_params_set_bhsd_strides(&decode);
  EXPECT_EQ(name_of(select_kernel(decode, h100, "auto")), "splitkv_sm80");
  const evosdpa_params_t prefill = valid_params(2, 16, 4096, 4096, 128);
  EXPECT_NE(name_of(select_kernel(prefill, h100, "auto")), "splitkv_sm80");
}

TEST(KvCacheSelection, OnlySplitKvSplits) {
  evosdpa_params_t p = valid_params(1, 8, 1, 4096, 64);
  p.num_splits = 3;
  EXPECT_EQ(name_of(select_kernel(p, device(9, 0), "auto")), "splitkv_sm80");
  for (const char* other : {"mma_sm80", "wgmma_sm90", "reference"}) {
    const Selection s = select_kernel(p, device(9, 0), other);
    EXPECT_EQ(s.check.status, EVOSDPA_ERROR_NOT_SUPPORTED) << other;
    EXPECT_NE(s.check.message.find("num_splits"), std::string::npos) << s.check.message;
  }
}

TEST(SplitKvSplits, HeuristicFillsOneWaveOnlyWhenTheGridDoesNot) {
  using splitkv::choose_splits;
  // B=1, 8 K/V heads, Lq=1 on 132 SMs. Dense, one block per SM: 1024 tiles of 128 keys (L=128k) give 16
  // parts, 128 blocks (FlashAttention-2's heuristic took 14).
  EXPECT_EQ(choose_splits(8, 1024, 132), 16);
  EXPECT_EQ(choose_splits(8, 64, 132), 16);  // L=8k
  EXPECT_EQ(choose_splits(8, 8, 132), 8);    // L=1k: one tile per part
  EXPECT_EQ(choose_splits(8, 15, 132), 15);  // 15 tiles: 15 parts
  EXPECT_EQ(choose_splits(8, 20, 132), 10);  // 16 parts of 20 tiles would leave 6 empty: 10 of 2
  // Paged, two blocks per SM (264 slots): 2048 tiles of 64 keys, 33 parts (FlashAttention-2's: 29).
  EXPECT_EQ(choose_splits(8, 2048, 264), 33);
  EXPECT_EQ(choose_splits(8 * 8, 128, 264), 4);  // B=8
  EXPECT_EQ(choose_splits(16, 1024, 132), 8);    // B=2
  EXPECT_EQ(choose_splits(64, 64, 132), 2);      // B=8, 8k keys in 128-key tiles: 128 blocks
  EXPECT_EQ(choose_splits(96, 1024, 132), 1);    // one part per SM already (73%): no room for two
  EXPECT_EQ(choose_splits(8 * 16, 2048, 132), 1);  // 80% of a wave already
  EXPECT_EQ(choose_splits(8, 1, 132), 1);          // one key tile: nothing to split
  EXPECT_EQ(choose_splits(1, 100000, 132), splitkv::kMaxSplits);
  EXPECT_EQ(choose_splits(1, 5, 132), 5);  // never more parts than key tiles
  EXPECT_EQ(choose_splits(0, 5, 132), 1);
}

TEST(SplitKvSplits, WithinTheWorkspaceGiven) {
  const DeviceInfo h100 = [] {
    DeviceInfo d = device(9, 0);
    d.sm_count = 132;
    return d;
  }();
  evosdpa_params_t p = valid_params(1, 32, 1, 131072, 128);
  p.heads_kv = 8;
  evosdpa_params_set_bhsd_strides(&p);
  const long long rows = 32, per_split = rows * (128 + 1) * 4;
  // No workspace: no split, nothing needed.
  Selection s = select_kernel(p, h100, "splitkv_sm80");
  ASSERT_TRUE(s.check.ok()) << s.check.message;
  EXPECT_EQ(s.splits, 1);
  EXPECT_EQ(s.workspace_bytes, 0u);
  const int wanted = static_cast<int>(s.workspace_wanted / per_split);  // the heuristic's, any workspace
  EXPECT_GT(wanted, 5);
  EXPECT_EQ(s.workspace_wanted, static_cast<size_t>(wanted * per_split));
  // A size without a pointer: still no split ("none without one").
  p.workspace_size = SIZE_MAX;
  s = select_kernel(p, h100, "splitkv_sm80");
  EXPECT_EQ(s.splits, 1);
  EXPECT_EQ(s.workspace_bytes, 0u);
  // Room for 5 parts: 5.
  p.workspace = reinterpret_cast<void*>(uintptr_t{0x80000000});
  p.workspace_size = 5 * per_split + 7;
  s = select_kernel(p, h100, "splitkv_sm80");
  EXPECT_EQ(s.splits, 5);
  EXPECT_EQ(s.workspace_bytes, static_cast<size_t>(5 * per_split));
  EXPECT_EQ(s.workspace_wanted, static_cast<size_t>(wanted * per_split));
  // Unlimited: the heuristic's count.
  p.workspace_size = SIZE_MAX;
  s = select_kernel(p, h100, "splitkv_sm80");
  EXPECT_EQ(s.splits, wanted);
  EXPECT_EQ(s.workspace_bytes, static_cast<size_t>(wanted * per_split));
  // A fixed count is taken as given (capped at the key tiles), whatever the workspace; the call then
  // checks that the workspace holds it.
  p.workspace_size = 0;
  p.num_splits = 3;
  s = select_kernel(p, h100, "splitkv_sm80");
  EXPECT_EQ(s.splits, 3);
  EXPECT_EQ(s.workspace_bytes, static_cast<size_t>(3 * per_split));
  p.num_splits = 1000000;
  p.seqlen_k = 300;  // 3 tiles of 128 keys on the H100's row, 5 of 64 where a block has 99 KiB (sm_86/89)
  evosdpa_params_set_bhsd_strides(&p);
  s = select_kernel(p, h100, "splitkv_sm80");
  EXPECT_EQ(s.splits, 3);
  DeviceInfo small = h100;  // the same build's architecture, less shared memory
  small.max_smem_per_block_optin = 99 * 1024;
  s = select_kernel(p, small, "splitkv_sm80");
  ASSERT_TRUE(s.check.ok()) << s.check.message;
  EXPECT_EQ(s.splits, 5);
}

TEST(SplitKvSplits, RowsByTheDevice) {
  // D = 128: the 8-warp row on sm_90 (192 KiB, compiled for sm_90a), dense or paged; the 96 KiB row on
  // other devices whatever their shared memory (sm_100's 227 KiB included), and on sm_86 / sm_89 (99 KiB)
  // or sm_80 (163 KiB).
  EXPECT_EQ(splitkv::config_for(128, true, 227 * 1024, 2), splitkv::kRowD128Wide);
  EXPECT_EQ(splitkv::config_for(128, false, 227 * 1024, 2), splitkv::kRowD128);
  EXPECT_EQ(splitkv::config_for(128, true, 163 * 1024, 2), splitkv::kRowD128);
  EXPECT_EQ(splitkv::config_for(128, false, 99 * 1024, 2), splitkv::kRowD128);
  EXPECT_EQ(splitkv::config_for(64, true, 227 * 1024, 2), splitkv::kRowD64);
  EXPECT_EQ(splitkv::config_for(96, true, 227 * 1024, 2), -1);
  // Under 96 KiB: on sm_90 the 48 KiB row, elsewhere none.
  EXPECT_EQ(splitkv::config_for(128, true, 64 * 1024, 2), splitkv::kRowD128Short);
  EXPECT_EQ(splitkv::config_for(128, false, 64 * 1024, 2), -1);
  EXPECT_EQ(splitkv::config_for(128, true, 32 * 1024, 2), -1);
}

TEST(SplitKvSplits, ShortCachesOfAWaveOfBlocksTakeTheSmallerRow) {
  using splitkv::short_cache_row;
  const long long optin = 227 * 1024, sms = 132;
  // Up to 1024 keys with at least a block per SM: the 96 KiB row, two per SM; from two blocks per SM
  // on sm_90, the 48 KiB row, four per SM.
  EXPECT_EQ(short_cache_row(splitkv::kRowD128Wide, 1024, 132, sms, optin, 2, true), splitkv::kRowD128);
  EXPECT_EQ(short_cache_row(splitkv::kRowD128Wide, 1, 263, sms, optin, 2, true), splitkv::kRowD128);
  EXPECT_EQ(short_cache_row(splitkv::kRowD128Wide, 1, 264, sms, optin, 2, true), splitkv::kRowD128Short);
  EXPECT_EQ(short_cache_row(splitkv::kRowD128Wide, 1024, 512, sms, optin, 2, true), splitkv::kRowD128Short);
  EXPECT_EQ(short_cache_row(splitkv::kRowD128Wide, 1024, 512, sms, optin, 2, false), splitkv::kRowD128);
  // A longer cache, or fewer blocks than SMs: the 8-warp row.
  EXPECT_EQ(short_cache_row(splitkv::kRowD128Wide, 1025, 512, sms, optin, 2, true), splitkv::kRowD128Wide);
  EXPECT_EQ(short_cache_row(splitkv::kRowD128Wide, 1024, 131, sms, optin, 2, true), splitkv::kRowD128Wide);
  // No other row of the head dim that fits twice, or none the device may take: unchanged.
  EXPECT_EQ(short_cache_row(splitkv::kRowD128, 512, 512, sms, 160 * 1024, 2, false), splitkv::kRowD128);
  EXPECT_EQ(short_cache_row(splitkv::kRowD128, 512, 512, sms, 99 * 1024, 2, false), splitkv::kRowD128);
  EXPECT_EQ(short_cache_row(splitkv::kRowD64, 512, 512, sms, optin, 2, true), splitkv::kRowD64);
  EXPECT_EQ(short_cache_row(-1, 512, 512, sms, optin, 2, true), -1);
  // Shared memory for three 48 KiB blocks but not two 96 KiB ones: the 48 KiB row from 1.5 per SM.
  EXPECT_EQ(short_cache_row(splitkv::kRowD128Wide, 512, 512, sms, 160 * 1024, 2, true), splitkv::kRowD128Short);
  EXPECT_EQ(short_cache_row(splitkv::kRowD128Wide, 512, 197, sms, 160 * 1024, 2, true), splitkv::kRowD128Wide);

  // Through the family: Hq/Hkv 32/8, Lq 1, D 128 on an H100: B=64 (512 blocks) against caches of 1024
  // and 2048 keys, and B=32 (256 blocks) against 1024.
  DeviceInfo h100{};
  h100.cc_major = 9;
  h100.sm_count = 132;
  h100.max_smem_per_block_optin = 227 * 1024;
  for (const auto& [batch, keys, row] : {std::tuple{64LL, 1024LL, splitkv::kRowD128Short},
                                         std::tuple{64LL, 2048LL, splitkv::kRowD128Wide},
                                         std::tuple{32LL, 1024LL, splitkv::kRowD128}}) {
    evosdpa_params_t p = valid_params(batch, 32, 1, keys, 128);
    p.heads_kv = 8;
    evosdpa_params_set_bshd_strides(&p);
    const Selection s = select_kernel(p, h100, "splitkv_sm80");
    ASSERT_TRUE(s.check.ok()) << s.check.message;
    EXPECT_EQ(s.variant, row) << batch << " " << keys;
  }
}

TEST(SplitKvSplits, PagedCachesOfFewSequencesTakeTheDensestRow) {
  using splitkv::paged_split_row;
  const long long optin = 227 * 1024, sms = 132;
  const int wide = splitkv::kRowD128Wide;
  // From a quarter of the SMs' count of blocks to one fewer than the SMs, on sm_90: the 48 KiB row, four
  // per SM.
  EXPECT_EQ(paged_split_row(wide, true, 64, sms, optin, 2, true), splitkv::kRowD128Short);
  EXPECT_EQ(paged_split_row(wide, true, 33, sms, optin, 2, true), splitkv::kRowD128Short);
  EXPECT_EQ(paged_split_row(wide, true, 131, sms, optin, 2, true), splitkv::kRowD128Short);
  // A dense cache, fewer or more blocks, another device: unchanged.
  EXPECT_EQ(paged_split_row(wide, false, 64, sms, optin, 2, true), wide);
  EXPECT_EQ(paged_split_row(wide, true, 32, sms, optin, 2, true), wide);
  EXPECT_EQ(paged_split_row(wide, true, 132, sms, optin, 2, true), wide);
  EXPECT_EQ(paged_split_row(splitkv::kRowD128, true, 64, sms, 163 * 1024, 2, false), splitkv::kRowD128);
  EXPECT_EQ(paged_split_row(splitkv::kRowD128, true, 64, sms, 99 * 1024, 2, false), splitkv::kRowD128);
  EXPECT_EQ(paged_split_row(splitkv::kRowD64, true, 64, sms, optin, 2, true), splitkv::kRowD64);
  EXPECT_EQ(paged_split_row(-1, true, 64, sms, optin, 2, true), -1);
  // sm_100's shared memory (227 KiB) without sm_90a code: the 96 KiB row, never the 48 KiB one.
  EXPECT_EQ(paged_split_row(splitkv::kRowD128, true, 64, 148, optin, 2, false), splitkv::kRowD128);

  // The plan (plan_call): B=8 paged (64 blocks), 4096 keys, on sm_90. With a workspace for its 8 parts
  // the 48 KiB row; with less, or none, or a count of the caller's, the 8-warp row as before; the parts
  // wanted (the size query's answer) are the 48 KiB row's unless the caller fixed them.
  using splitkv::plan_call;
  const auto plan = [&](bool paged, long long fixed, long long fit) {
    return plan_call(128, true, optin, 2, sms, 4096, 64, paged, fixed, fit);
  };
  for (const long long fit : {8LL, 100LL}) {
    EXPECT_EQ(plan(true, 0, fit).row, splitkv::kRowD128Short) << fit;
    EXPECT_EQ(plan(true, 0, fit).splits, 8) << fit;
  }
  for (const long long fit : {0LL, 1LL, 2LL, 7LL}) {
    EXPECT_EQ(plan(true, 0, fit).row, wide) << fit;
    EXPECT_EQ(plan(true, 0, fit).splits, fit >= 2 ? 2 : 1) << fit;
    EXPECT_EQ(plan(true, 0, fit).wanted, 8) << fit;
  }
  EXPECT_EQ(plan(true, 2, 0).row, wide);
  EXPECT_EQ(plan(true, 2, 0).splits, 2);
  EXPECT_EQ(plan(true, 2, 0).wanted, 2);
  EXPECT_EQ(plan(true, 12, 0).row, wide);
  EXPECT_EQ(plan(false, 0, 100).row, wide);
  EXPECT_EQ(plan(false, 0, 100).splits, 2);
  EXPECT_EQ(plan_call(96, true, optin, 2, sms, 4096, 64, true, 0, 100).row, -1);

  // Through the family: B=8, Hq/Hkv 32/8, Lq 1, D 128, pages of 16 keys, 4096 keys per sequence, on an
  // H100 with a workspace: the 48 KiB row in 8 parts (64 blocks over its 528 slots); 1 sequence keeps
  // the 8-warp row.
  DeviceInfo h100{};
  h100.cc_major = 9;
  h100.sm_count = 132;
  h100.max_smem_per_block_optin = 227 * 1024;
  for (const int batch : {8, 1}) {
    evosdpa_params_t p = valid_params(batch, 32, 1, 4096, 128);
    p.heads_kv = 8;
    evosdpa_params_set_bshd_strides(&p);
    p.k_head_stride = p.v_head_stride = 128;
    p.k_seq_stride = p.v_seq_stride = 8 * 128;
    p.k_batch_stride = p.v_batch_stride = 16 * 8 * 128;
    p.page_table = kTable;
    p.page_table_batch_stride = 256;
    p.page_size = 16;
    p.num_pages = batch * 256;
    p.workspace = reinterpret_cast<void*>(uintptr_t{0x80000000});
    p.workspace_size = SIZE_MAX;
    Selection s = select_kernel(p, h100, "splitkv_sm80");
    ASSERT_TRUE(s.check.ok()) << s.check.message;
    EXPECT_EQ(s.variant, batch == 8 ? splitkv::kRowD128Short : splitkv::kRowD128Wide) << batch;
    if (batch != 8) continue;
    EXPECT_EQ(s.splits, 8);
    const size_t eight = s.workspace_bytes;
    // Without a workspace: the 8-warp row unsplit, and the size query's answer still the 8 parts'.
    p.workspace = nullptr;
    p.workspace_size = 0;
    s = select_kernel(p, h100, "splitkv_sm80");
    EXPECT_EQ(s.variant, splitkv::kRowD128Wide);
    EXPECT_EQ(s.splits, 1);
    EXPECT_EQ(s.workspace_wanted, eight);
  }
}

TEST(SplitKvSplits, OnlyCallersOfTheServingHeaderLendTheForwardTheirWorkspace) {
  // A 0.4 caller's struct ends at backward_mode: its workspace was the backward's alone.
  EXPECT_FALSE(knows_forward_workspace(offsetof(evosdpa_params_t, seqused_k)));
  EXPECT_FALSE(knows_forward_workspace(offsetof(evosdpa_params_t, num_splits)));
  EXPECT_TRUE(knows_forward_workspace(sizeof(evosdpa_params_t)));
}

TEST(SplitKvSplits, ForwardWorkspaceRules) {
  evosdpa_params_t p = valid_params(1, 4, 1, 1000, 64);
  EXPECT_TRUE(check_forward_workspace(p, 0).ok());
  EXPECT_EQ(check_forward_workspace(p, 1024).status, EVOSDPA_ERROR_INVALID_ARGUMENT);  // size 0
  p.workspace_size = 1024;
  EXPECT_NE(check_forward_workspace(p, 1024).message.find("null"), std::string::npos);
  p.workspace = reinterpret_cast<void*>(uintptr_t{0x80000008});
  EXPECT_NE(check_forward_workspace(p, 1024).message.find("aligned"), std::string::npos);
  p.workspace = const_cast<void*>(p.k);
  EXPECT_NE(check_forward_workspace(p, 1024).message.find("overlaps k"), std::string::npos);
  p.workspace = reinterpret_cast<void*>(uintptr_t{0x80000000});
  EXPECT_TRUE(check_forward_workspace(p, 1024).ok());
}

}  // namespace
