// The Hopper kernel's work order (kernels/wgmma/wgmma_order.hpp): every query block of every head is
// taken exactly once, and on causal shapes the CTAs' loads (K/V tiles summed over their items) stay even.
// And its choice among the tile-table rows of one head size and of splitting items over clusters
// (choose_config).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/wgmma/wgmma_config.hpp"
#include "kernels/wgmma/wgmma_order.hpp"

namespace {

using evosdpa::detail::wgmma_sm90::BlockOfHead;
using evosdpa::detail::wgmma_sm90::Choice;
using evosdpa::detail::wgmma_sm90::choose_config;
using evosdpa::detail::wgmma_sm90::FastDiv;
using evosdpa::detail::wgmma_sm90::ItemOrder;
using evosdpa::detail::wgmma_sm90::kConfigs;
using evosdpa::detail::wgmma_sm90::kMaxSplits;
using evosdpa::detail::wgmma_sm90::row_of;

// The launch's divisors (fast_div.hpp) against / and %: every divisor up to 4096 and powers of two up to
// 2^30 and their neighbours, on dividends near 0, near multiples of the divisor and near 2^31.
TEST(FastDiv, MatchesIntegerDivision) {
  std::vector<int> divisors;
  for (int d = 1; d <= 4096; ++d) divisors.push_back(d);
  for (int s = 12; s <= 30; ++s)
    for (int delta : {-1, 0, 1}) divisors.push_back((1 << s) + delta);
  divisors.push_back(2147483647);
  for (int d : divisors) {
    const FastDiv f(d);
    ASSERT_EQ(f.divisor(), d);
    std::vector<int64_t> ns = {0, 1, 2, 3, 2147483646, 2147483647};
    for (int64_t k : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1000}, int64_t{2147483647} / d})
      for (int64_t delta : {-1, 0, 1}) ns.push_back(k * d + delta);
    for (int64_t n : ns) {
      if (n < 0 || n > 2147483647) continue;
      const int ni = static_cast<int>(n);
      const auto qr = f.divmod(ni);
      ASSERT_EQ(f.div(ni), ni / d) << ni << " / " << d;
      ASSERT_EQ(qr.quot, ni / d) << ni << " / " << d;
      ASSERT_EQ(qr.rem, ni % d) << ni << " % " << d;
    }
  }
}

TEST(WgmmaOrder, EveryItemExactlyOnce) {
  for (bool causal : {false, true})
    for (int q_blocks = 1; q_blocks <= 13; ++q_blocks)
      for (int heads = 1; heads <= 7; ++heads)
        for (int grid : {1, 2, 3, 4, 5, 6, 8, 12, 132}) {
          const int count = q_blocks * heads;
          if (grid > count) continue;  // the launch keeps the grid no larger than the item count
          std::vector<int> seen(count, 0);
          const ItemOrder order(q_blocks, heads, grid, causal);
          for (int i = 0; i < count; ++i) {
            const BlockOfHead at = order(i);
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
  const auto& cfg = kConfigs[choose_config(head_dim, batch * heads, seqlen, seqlen, true, 132).row];
  const int bm = cfg.block_m(), bn = cfg.block_n;
  const int q_blocks = static_cast<int>((seqlen + bm - 1) / bm);
  const int count = q_blocks * static_cast<int>(batch * heads);
  const int grid = std::min(count, 132);
  std::vector<int64_t> load(grid, 0);
  const ItemOrder order(q_blocks, static_cast<int>(batch * heads), grid, true);
  for (int i = 0; i < count; ++i) {
    const int64_t keys = std::min<int64_t>((order(i).qb + 1) * int64_t{bm}, seqlen);
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

// Non-causal: busiest CTA's load over the mean, a CTA's load being the warpgroup tiles of its items (a
// block's tiles times its 64-row warpgroups that have rows: the last block of a 192-row row at L = 2^n
// holds one or two), on 132 SMs, with the row choose_config takes.
double balance_full(int64_t batch, int64_t heads, int64_t seqlen, int head_dim, bool fp8) {
  const auto& cfg = kConfigs[choose_config(head_dim, batch * heads, seqlen, seqlen, false, 132, fp8).row];
  const int bm = cfg.block_m(), bn = cfg.block_n;
  const int q_blocks = static_cast<int>((seqlen + bm - 1) / bm);
  const int count = q_blocks * static_cast<int>(batch * heads);
  const int grid = std::min(count, 132);
  const int64_t tiles = (seqlen + bn - 1) / bn;
  std::vector<int64_t> load(grid, 0);
  const ItemOrder order(q_blocks, static_cast<int>(batch * heads), grid, false);
  for (int i = 0; i < count; ++i) {
    const int64_t rows = std::min<int64_t>(bm, seqlen - int64_t{order(i).qb} * bm);
    load[i % grid] += tiles * ((rows + 63) / 64);
  }
  int64_t total = 0;
  for (int64_t l : load) total += l;
  return static_cast<double>(total) / grid / static_cast<double>(*std::max_element(load.begin(), load.end()));
}

// Plain striding put every short last block on the same CTAs where 132 is a multiple of the block count
// (L = 512, 1024: 0.86 on the 16-bit D = 64 points and FP8 D = 128 L = 1024); the rotated rounds give
// 0.94-0.99, 0.91 at FP8 D = 128 L = 1024 (11.6 items per CTA: 12 whole ones on the busiest). Measured
// on an H200 (docs/perf-log.md v14.5): 16-bit D = 64 L = 512 and 1024 5-6% faster, FP8 3-4%.
TEST(WgmmaOrder, NonCausalLoadsEvenOnTheFa3Grid) {
  for (bool fp8 : {false, true})
    for (int d : {64, 128})
      for (int64_t l = 512; l <= 16384; l *= 2) {
        const double b = balance_full(16384 / l, 2048 / d, l, d, fp8);
        EXPECT_GE(b, fp8 ? 0.9 : 0.94) << "D" << d << " L" << l << (fp8 ? " fp8" : "");
      }
}

TEST(WgmmaOrder, RoundShiftMakesTheStepCoprime) {
  EXPECT_EQ(ItemOrder::round_shift(1, 132), 0);
  EXPECT_EQ(ItemOrder::round_shift(7, 132), 0);  // 132 mod 7 = 6: coprime already, plain striding
  EXPECT_EQ(ItemOrder::round_shift(6, 132), 1);  // 132 mod 6 = 0
  EXPECT_EQ(ItemOrder::round_shift(86, 132), 1);  // 46 and 86 share 2; 47 is prime
  for (int q = 2; q <= 300; ++q)
    for (int g : {1, 2, 3, 8, 66, 114, 132}) {
      const int s = ItemOrder::round_shift(q, g);
      int a = (g % q + s) % q, b = q;
      while (a != 0) {
        const int r = b % a;
        b = a;
        a = r;
      }
      EXPECT_EQ(b, 1) << "q_blocks " << q << " grid " << g;
    }
}

// The row choose_config takes for a self-attention call (Lq = Lk) on 132 SMs.
int row(int d, int64_t batch_heads, int64_t seqlen, bool causal = false) {
  return choose_config(d, batch_heads, seqlen, seqlen, causal, 132).row;
}

TEST(WgmmaRows, FewWavesTakeSmallerItems) {
  // (2,8,2048,64): 176 items of 192 rows are two rounds on 132 SMs, as are 256 items of 128 rows.
  EXPECT_EQ(row(64, 2 * 8, 2048), row_of(64, 2));
  // The fa3 grid (16k tokens, 32 heads): many rounds, where three consumers are faster per row.
  for (int64_t l = 512; l <= 16384; l *= 2) EXPECT_EQ(row(64, 16384 / l * 32, l), row_of(64, 3)) << l;
  // Causal: two consumers up to L = 1024, where they ran faster, three from 2048.
  for (int64_t l = 512; l <= 16384; l *= 2)
    EXPECT_EQ(row(64, 16384 / l * 32, l, true), row_of(64, l <= 1024 ? 2 : 3)) << l;
  EXPECT_EQ(row(128, 2 * 8, 2048), row_of(128, 2));
  EXPECT_EQ(row(96, 16, 2048), -1);
  // Item counts past 2^63 are estimated in floating point, not overflowed.
  EXPECT_EQ(row(64, (int64_t{1} << 62) - 1, 1 << 30), row_of(64, 3));
}

TEST(WgmmaRows, LessThanAWaveOfSmallItemsSplitsKeysInTheCta) {
  for (int d : {64, 128}) {
    // The mission shape (1,8,512,64) and its D=128 twin: 64 items of 64 rows, one wave.
    const Choice c = choose_config(d, 8, 512, 512, false, 132);
    EXPECT_TRUE(kConfigs[c.row].split_keys) << d;
    EXPECT_EQ(c.splits, 1);
    EXPECT_EQ(c.row, row_of(d, 2, true));
    // 256 items of 64 rows are more than a wave: never split_keys, which takes one item per CTA.
    EXPECT_FALSE(kConfigs[choose_config(d, 16, 1024, 1024, false, 132).row].split_keys) << d;
  }
}

TEST(WgmmaRows, FewItemsSplitTheirKeysOverClusters) {
  // One (batch, head) of 256 rows and 4096 keys: 2 items of 128 rows, their 32 K/V tiles split over
  // clusters of 8 (4 tiles each, and the merge), against 32 tiles per CTA for split_keys.
  Choice c = choose_config(64, 1, 256, 4096, false, 132);
  EXPECT_EQ(c.row, row_of(64, 2));
  EXPECT_EQ(c.splits, 8);
  // (1,8,1024,64): 64 items of 128 rows, 8 tiles each: a split into 2 would tie the split_keys row
  // without its merge, and ran 35% slower (kMergeTiles).
  c = choose_config(64, 8, 1024, 1024, false, 132);
  EXPECT_EQ(c.row, row_of(64, 2, true));
  EXPECT_EQ(c.splits, 1);
  // The mission shape (1,8,512,64): 4 tiles per item, fewer than two splits' worth: no split.
  EXPECT_EQ(choose_config(64, 8, 512, 512, false, 132).splits, 1);
  // 128 items: already a wave, no split.
  EXPECT_EQ(choose_config(128, 16, 1024, 1024, false, 132).splits, 1);
  // Never fewer than kMinTilesPerSplit tiles per CTA, nor a split without tiles to share.
  EXPECT_EQ(choose_config(64, 1, 64, 300, false, 132).splits, 1);
  EXPECT_EQ(choose_config(64, 1, 64, 1024, false, 132).splits, 1);  // 8 tiles: split_keys
  EXPECT_EQ(choose_config(64, 1, 64, 4096, false, 132).splits, 8);
  EXPECT_EQ(choose_config(64, 1, 64, 0, false, 132).splits, 1);
  EXPECT_EQ(choose_config(128, 1, 100, 1 << 20, false, 132).splits, kMaxSplits);
  // Whatever the call, the clusters hold no more CTAs than SMs, splits is a power of two up to
  // kMaxSplits, and it survives the trip through KernelFamily's variant; a split_keys row has all its
  // items (64 rows) in one wave and no cluster.
  for (int d : {64, 128})
    for (int64_t bh : {1, 3, 8, 40, 200})
      for (int64_t lq : {1, 100, 512, 1000, 5000})
        for (int64_t lk : {0, 1, 129, 512, 4096})
          for (int sms : {1, 8, 78, 132}) {
            const Choice ch = choose_config(d, bh, lq, lk, lq % 2 == 0, sms);
            ASSERT_GE(ch.row, 0);
            const int64_t bm = kConfigs[ch.row].block_m();
            const int64_t tiles = (lk + kConfigs[ch.row].block_n - 1) / kConfigs[ch.row].block_n;
            EXPECT_TRUE(ch.splits == 1 || ch.splits == 2 || ch.splits == 4 || ch.splits == 8);
            if (kConfigs[ch.row].split_keys) {
              EXPECT_LE((lq + 63) / 64 * bh, sms);
              EXPECT_EQ(ch.splits, 1);
            }
            if (ch.splits > 1) {
              EXPECT_LE((lq + bm - 1) / bm * bh * ch.splits, ch.splits >= 4 ? sms - sms / 8 : sms);
              EXPECT_LE(ch.splits * evosdpa::detail::wgmma_sm90::kMinTilesPerSplit, tiles);
            }
            const Choice back = Choice::of_variant(ch.variant());
            EXPECT_EQ(back.row, ch.row);
            EXPECT_EQ(back.splits, ch.splits);
          }
}

}  // namespace
