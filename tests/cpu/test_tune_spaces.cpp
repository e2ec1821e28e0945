// The kernel families' genome spaces (tune/spaces.hpp): every row of the hand-made tables is a valid
// genome that maps back to the row, the families' rules refuse what the build could not compile, and
// mutation inside a space only proposes configurations the family's static checks accept.
#include <gtest/gtest.h>

#include <set>

#include "search.hpp"
#include "spaces.hpp"

using namespace evosdpa::tune;
namespace mma = evosdpa::detail::mma_sm80;
namespace wg = evosdpa::detail::wgmma_sm90;

namespace {

TEST(TuneSpaces, MmaTableRowsAreValidGenomesAndRoundTrip) {
  int rows = 0;
  for (const mma::TileConfig& c : mma::kHandRows) {
    const GenomeSpace s = mma_sm80_space(c.head_dim, c.small_grid);
    const Genome g = mma_sm80_genome(c);
    EXPECT_EQ(s.check(g), "") << s.family << " " << s.describe(g);
    const mma::TileConfig back = mma_sm80_config(g, c.head_dim, c.small_grid);
    EXPECT_EQ(back.warps, c.warps);
    EXPECT_EQ(back.m_tiles, c.m_tiles);
    EXPECT_EQ(back.block_n, c.block_n);
    EXPECT_EQ(back.min_blocks_per_sm, c.min_blocks_per_sm);
    EXPECT_EQ(back.q_in_registers, c.q_in_registers);
    EXPECT_EQ(mma_sm80_table(c.head_dim, c.small_grid).front(), g);
    ++rows;
  }
  EXPECT_EQ(rows, static_cast<int>(sizeof(mma::kHandRows) / sizeof(mma::kHandRows[0])));
}

TEST(TuneSpaces, WgmmaTableRowsAreValidGenomesAndRoundTrip) {
  for (const wg::TileConfig& c : wg::kHandRows) {
    if (c.fp8) continue;  // the space covers the 16-bit rows
    const GenomeSpace s = wgmma_sm90_space(c.head_dim, c.split_keys, c.consumers);
    const std::vector<Genome> table = wgmma_sm90_table(c.head_dim, c.split_keys, c.consumers);
    EXPECT_EQ(table.size(), 1u) << s.family;  // one hand-made row per bucket
    bool found = false;
    for (const Genome& g : table) {
      EXPECT_EQ(s.check(g), "") << s.family << " " << s.describe(g);
      const wg::TileConfig back = wgmma_sm90_config(g, c.head_dim, c.split_keys);
      found = found || (back.block_n == c.block_n && back.stages == c.stages && back.consumers == c.consumers &&
                        back.producer_regs == c.producer_regs && back.consumer_regs == c.consumer_regs);
    }
    EXPECT_TRUE(found) << "row D=" << c.head_dim << " consumers " << c.consumers << " not reproduced";
  }
}

TEST(TuneSpaces, RulesRefuseWhatCannotBeBuilt) {
  // D=128, 8 warps of 64 rows: 512-row Q tile, 128 KiB of shared memory.
  const GenomeSpace m = mma_sm80_space(128, false);
  EXPECT_NE(m.check({8, 4, 64, 1, 0}).find("shared memory"), std::string::npos) << m.check({8, 4, 64, 1, 0});
  EXPECT_NE(m.check({4, 2, 48, 2, 1}), "");  // 48 is not a legal block_n
  // D=128, 2 warps: 64 threads over 16 chunk columns copy rows 4 apart, which load_tile's swizzle
  // refuses (static_assert; the first H100 tuning run at D=128 spent 9 of its candidates on such
  // NVRTC failures).
  EXPECT_NE(m.check({2, 2, 64, 1, 0}), "");
  EXPECT_NE(m.check({2, 1, 32, 2, 1}), "");
  EXPECT_EQ(mma_sm80_space(64, false).check({2, 2, 64, 2, 0}), "");  // D=64: 8 columns, rows 8 apart
  // D=128, 256-key tiles in 4 stages: over sm_90's 227 KiB.
  const GenomeSpace w = wgmma_sm90_space(128, false, 2);
  EXPECT_NE(w.check({256, 4, 2, 24}), "");
  EXPECT_NE(w.check({128, 2, 3, 24}), "");  // another bucket's consumer count
}

TEST(TuneSpaces, WgmmaConsumersClaimNoMoreThanTheCtaWasLaunchedWith) {
  // Two consumers and a producer at 32: 384 threads launch with 168 registers each (504 per 128
  // threads), so the consumers get (504 - 32) / 2 -> 232, not the (512 - 32) / 2 = 240 the register
  // file would hold, which setmaxnreg would wait for forever.
  const wg::TileConfig c = wgmma_sm90_config({128, 2, 2, 32}, 128, false);
  EXPECT_EQ(c.consumer_regs, 232);
  EXPECT_TRUE(wg::valid(c));
  for (int d : {64, 128})
    for (int consumers : {2, 3})
      for (int producer : {24, 32, 40}) {
        const wg::TileConfig t = wgmma_sm90_config({128, 2, consumers, producer}, d, false);
        EXPECT_LE(128 * (t.producer_regs + t.consumers * t.consumer_regs), t.threads() * t.launch_regs());
        EXPECT_GT(128 * (t.producer_regs + t.consumers * (t.consumer_regs + 8)), t.threads() * t.launch_regs());
      }
}

TEST(TuneSpaces, MutationStaysInsideTheFamiliesStaticChecks) {
  for (int d : {64, 128}) {
    const GenomeSpace m = mma_sm80_space(d, false);
    std::mt19937_64 rng(5);
    std::set<Genome> seen;
    const Genome parent = mma_sm80_table(d, false).front();
    for (int i = 0; i < 200; ++i) {
      const Genome g = mutate(parent, m, 2, rng, [&](const Genome& x) { return seen.count(x) > 0; }, 500);
      if (g.empty()) break;
      seen.insert(g);
      const mma::TileConfig c = mma_sm80_config(g, d, false);
      ASSERT_TRUE(mma::valid(c)) << m.describe(g);
      ASSERT_LE(c.smem_bytes(), 99 * 1024) << m.describe(g);
    }
    EXPECT_GT(seen.size(), 5u);
    const GenomeSpace w = wgmma_sm90_space(d, false, 2);
    const Genome wp = wgmma_sm90_table(d, false, 2).front();
    for (int i = 0; i < 100; ++i) {
      const Genome g = mutate(wp, w, 2, rng, [](const Genome&) { return false; }, 500);
      if (g.empty()) break;
      ASSERT_TRUE(wg::valid(wgmma_sm90_config(g, d, false))) << w.describe(g);
      ASSERT_EQ(g[2], 2) << w.describe(g);  // the bucket's consumers
    }
  }
}

}  // namespace
