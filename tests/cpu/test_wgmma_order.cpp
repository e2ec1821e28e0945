// The Hopper kernel's work order (kernels/wgmma/wgmma_order.hpp): every query block of every head is
// taken exactly once, and on causal shapes the CTAs' loads (K/V tiles summed over their items) stay even.
// And its choice among the tile-table rows of one head size (choose_config).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/wgmma/wgmma_config.hpp"
#include "kernels/wgmma/wgmma_order.hpp"

namespace {

using evosdpa::detail::wgmma_sm90::BlockOfHead;
using evosdpa::detail::wgmma_sm90::choose_config;
using evosdpa::detail::wgmma_sm90::item_order;
using evosdpa::detail::wgmma_sm90::kConfigs;
using evosdpa::detail::wgmma_sm90::row_of;

TEST(WgmmaOrder, EveryItemExactlyOnce) {
  for (bool causal : {false, true})
    for (int q_blocks = 1; q_blocks <= 13; ++q_blocks)
      for (int heads = 1; heads <= 7; ++heads)
        for (int grid : {1, 2, 3, 5, 8, 132}) {
          const int count = q_blocks * heads;
          if (grid > count) continue;  // the launch keeps the grid no larger than the item count
          std::vector<int> seen(count, 0);
          for (int i = 0; i < count; ++i) {
            const BlockOfHead at = item_order(i, q_blocks, heads, grid, causal);
            ASSERT_GE(at.qb, 0);
            ASSERT_LT(at.qb, q_blocks);
            ASSERT_GE(at.bh, 0);
            ASSERT_LT(at.bh, heads);
            ++seen[at.bh * q_blocks + at.qb];
          }
          for (int n : seen)
            ASSERT_EQ(n, 1) << "causal " << causal << " q_blocks " << q_blocks << " heads " << heads << " grid "
                            << grid;
        }
}

// Busiest CTA's load over the mean, with the kernel's tile table and 132 SMs, causal (top-left, Lq = Lk).
double balance(int64_t batch, int64_t heads, int64_t seqlen, int head_dim) {
  const auto& cfg = kConfigs[choose_config(head_dim, batch * heads, seqlen, 132)];
  const int bm = cfg.block_m(), bn = cfg.block_n;
  const int q_blocks = static_cast<int>((seqlen + bm - 1) / bm);
  const int count = q_blocks * static_cast<int>(batch * heads);
  const int grid = std::min(count, 132);
  std::vector<int64_t> load(grid, 0);
  for (int i = 0; i < count; ++i) {
    const int64_t keys = std::min<int64_t>((item_order(i, q_blocks, static_cast<int>(batch * heads), grid, true).qb + 1) *
                                               int64_t{bm},
                                           seqlen);
    load[i % grid] += (keys + bn - 1) / bn;
  }
  int64_t total = 0;
  for (int64_t l : load) total += l;
  return static_cast<double>(total) / grid / static_cast<double>(*std::max_element(load.begin(), load.end()));
}

TEST(WgmmaOrder, CausalLoadsEvenOnTheFa3Grid) {
  for (int d : {64, 128})
    for (int64_t l = 512; l <= 16384; l *= 2) {
      const double b = balance(16384 / l, 2048 / d, l, d);
      EXPECT_GE(b, 0.93) << "D" << d << " L" << l;
    }
}

TEST(WgmmaRows, FewWavesTakeSmallerItems) {
  // (2,8,2048,64): 176 items of 192 rows are two rounds on 132 SMs, as are 256 items of 128 rows.
  EXPECT_EQ(choose_config(64, 2 * 8, 2048, 132), row_of(64, 2));
  EXPECT_EQ(choose_config(64, 1 * 8, 512, 132), row_of(64, 2));
  // The fa3 grid (16k tokens, 32 heads): many rounds, where three consumers are faster per row.
  for (int64_t l = 512; l <= 16384; l *= 2) EXPECT_EQ(choose_config(64, 16384 / l * 32, l, 132), row_of(64, 3)) << l;
  EXPECT_EQ(choose_config(128, 2 * 8, 2048, 132), row_of(128, 2));
  EXPECT_EQ(choose_config(96, 16, 2048, 132), -1);
  // Item counts past 2^63 are estimated in floating point, not overflowed.
  EXPECT_EQ(choose_config(64, (int64_t{1} << 62) - 1, 1 << 30, 132), row_of(64, 3));
}

}  // namespace
