// evosdpa-tune's tuned table (issue 10): which genome a search puts in its model's table, and the file
// the build compiles (its rows parse as mma_config.hpp's TunedRow and pass the family's rules).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "kernels/mma/mma_config.hpp"
#include "kernels/wgmma/wgmma_config.hpp"
#include "search.hpp"
#include "spaces.hpp"
#include "tuned_table.hpp"

using namespace evosdpa::tune;
namespace mma = evosdpa::detail::mma_sm80;
namespace wg = evosdpa::detail::wgmma_sm90;

namespace {

// A search times its row only on the shapes that selection runs on that row's bucket on the GPU it
// measures: the acceptance grid's D=64 shapes on an H100 split into the default row's (2,8,2048) and the
// small-grid row's (1,8,512); on a GPU of 16 SMs every one fills the SMs with the default row.
TEST(TunedTable, SearchMeasuresTheShapesOfItsBucket) {
  std::vector<evosdpa::host::Shape> grid;
  for (const int64_t l : {512, 2048})
    for (const auto c : {EVOSDPA_CAUSAL_NONE, EVOSDPA_CAUSAL_TOP_LEFT}) {
      evosdpa::host::Shape s;
      s.batch = l / 512 == 1 ? 1 : 2, s.heads_q = s.heads_kv = 8, s.seqlen_q = s.seqlen_k = l, s.head_dim = 64;
      s.causal = c;
      grid.push_back(s);
    }
  evosdpa::host::Shape d128 = grid.back();
  d128.head_dim = 128;
  grid.push_back(d128);
  const auto seqlens = [](const std::vector<evosdpa::host::Shape>& v) {
    std::vector<int64_t> out;
    for (const auto& s : v) out.push_back(s.seqlen_q);
    return out;
  };
  EXPECT_EQ(seqlens(shapes_of_bucket(grid, 64, false, 90, 132)), (std::vector<int64_t>{2048, 2048}));
  EXPECT_EQ(seqlens(shapes_of_bucket(grid, 64, true, 90, 132)), (std::vector<int64_t>{512, 512}));
  EXPECT_EQ(seqlens(shapes_of_bucket(grid, 64, false, 90, 16)), (std::vector<int64_t>{512, 512, 2048, 2048}));
  EXPECT_TRUE(shapes_of_bucket(grid, 64, true, 90, 16).empty());
  EXPECT_EQ(seqlens(shapes_of_bucket(grid, 128, false, 90, 132)), (std::vector<int64_t>{2048}));
}

TEST(TunedTable, FamiliesParse) {
  int d = 0;
  bool small = true;
  EXPECT_TRUE(parse_mma_family("mma_sm80/d64", d, small));
  EXPECT_EQ(d, 64);
  EXPECT_FALSE(small);
  EXPECT_TRUE(parse_mma_family("mma_sm80/d128/small_grid", d, small));
  EXPECT_EQ(d, 128);
  EXPECT_TRUE(small);
  EXPECT_FALSE(parse_mma_family("wgmma_sm90/d64", d, small));
  EXPECT_FALSE(parse_mma_family("mma_sm80/d96", d, small));
}

// An elite within the search's gain of the table's row leaves the row in the table; one beyond it wins.
TEST(TunedTable, ChoiceNeedsTheSearchGain) {
  const Genome row = mma_sm80_table(64, false).front();
  State st;
  st.options.min_gain = 0.03;
  Genome other = row;
  other[3] = other[3] == 1 ? 2 : 1;  // min_blocks_per_sm
  st.elites = {{other, 1.02, 0.001}, {row, 0.996, 0.001}};
  EXPECT_EQ(table_choice(st, row), row);
  st.elites = {{row, 1.0, 0.001}, {other, 1.05, 0.001}};
  EXPECT_EQ(table_choice(st, row), other);
  st.elites = {{row, 1.0, 0.02}, {other, 1.05, 0.02}};  // 5% inside twice the combined error (5.7%)
  EXPECT_EQ(table_choice(st, row), row);
  st.elites.clear();
  EXPECT_EQ(table_choice(st, row), row);
}

TEST(TunedTable, FileTextAndIndex) {
  const TunedDevice h100{"NVIDIA H100 80GB HBM3", 90, 132};
  EXPECT_EQ(tuned_file_name(h100), "sm90_132.inc");
  const mma::TileConfig hand = mma::kConfigs[mma::config_index(128, false)];
  TunedEntry e{"d128.json", 128, false, mma_sm80_genome(hand), 1.011, true};
  const std::string text = tuned_file_text(h100, {e});
  // The row, as the build reads it.
  char expect[128];
  std::snprintf(expect, sizeof expect, "{90, 132, {128, %d, %d, %d, %d, %s, false}},\n", hand.warps, hand.m_tiles,
                hand.block_n, hand.min_blocks_per_sm, hand.q_in_registers ? "true" : "false");
  EXPECT_NE(text.find(expect), std::string::npos) << text;
  EXPECT_NE(text.find("compute capability 9.0, 132 SMs"), std::string::npos);
  EXPECT_NE(text.find("d128.json: the hand-made row (best elite 1.011x"), std::string::npos) << text;
  const std::string once = with_index_line("// header\n", "sm90_132.inc");
  EXPECT_EQ(once, "// header\n#include \"sm90_132.inc\"\n");
  EXPECT_EQ(with_index_line(once, "sm90_132.inc"), once);
}

// wgmma_sm90's buckets on an H100: the fa3 grid's D=64 shapes (batch 16384 / L, 32 heads) run on the
// consumer rows, (1,8,512) on the split_keys row; each shape in its choice's bucket, and in one at most
// (a cluster split is in none).
TEST(TunedTable, WgmmaSearchMeasuresTheShapesOfItsBucket) {
  std::vector<evosdpa::host::Shape> grid;
  for (const int64_t l : {512, 1024, 4096})
    for (const auto c : {EVOSDPA_CAUSAL_NONE, EVOSDPA_CAUSAL_BOTTOM_RIGHT}) {
      evosdpa::host::Shape s;
      s.batch = 16384 / l, s.heads_q = s.heads_kv = 32, s.seqlen_q = s.seqlen_k = l, s.head_dim = 64, s.causal = c;
      grid.push_back(s);
    }
  evosdpa::host::Shape tiny;
  tiny.batch = 1, tiny.heads_q = tiny.heads_kv = 8, tiny.seqlen_q = tiny.seqlen_k = 512, tiny.head_dim = 64;
  grid.push_back(tiny);
  size_t total = 0;
  for (const wg::TileConfig& c : wg::kHandRows) {
    if (c.fp8 || c.head_dim != 64) continue;
    const auto mine = wgmma_shapes_of_bucket(grid, 64, c.split_keys, c.consumers, 90, 132);
    total += mine.size();
    for (const auto& s : mine) {
      const wg::Choice ch = wg::choose_config(64, s.batch * s.heads_q, s.seqlen_q, s.seqlen_k,
                                              s.causal != EVOSDPA_CAUSAL_NONE, 132, false, 90);
      EXPECT_EQ(ch.splits, 1);
      EXPECT_EQ(wg::kConfigs[ch.row].consumers, c.consumers);
      EXPECT_EQ(wg::kConfigs[ch.row].split_keys, c.split_keys);
    }
  }
  EXPECT_EQ(total, grid.size());  // none of these is split over clusters
  const auto split = wgmma_shapes_of_bucket(grid, 64, true, 2, 90, 132);
  ASSERT_EQ(split.size(), 1u);
  EXPECT_EQ(split[0].batch, 1);
  EXPECT_EQ(wgmma_shapes_of_bucket(grid, 128, false, 2, 90, 132).size(), 0u);  // no D=128 shape
}

// The wgmma table's file: rows with the replaced row's speeds, each a hand-made bucket's; the family
// names a search's bucket and parse back.
TEST(TunedTable, WgmmaFileTextAndFamilies) {
  const TunedDevice h100{"NVIDIA H100 80GB HBM3", 90, 132};
  for (const wg::TileConfig& c : wg::kHandRows) {
    if (c.fp8) continue;
    int d = 0, consumers = 0;
    bool split = false;
    ASSERT_TRUE(parse_wgmma_family(wgmma_sm90_space(c.head_dim, c.split_keys, c.consumers).family, d, split, consumers));
    EXPECT_EQ(d, c.head_dim);
    EXPECT_EQ(split, c.split_keys);
    EXPECT_EQ(consumers, c.consumers);
  }
  int d = 0, consumers = 0;
  bool split = false;
  EXPECT_FALSE(parse_wgmma_family("mma_sm80/d64", d, split, consumers));
  EXPECT_FALSE(parse_wgmma_family("wgmma_sm90/d64/c4", d, split, consumers));
  const wg::TileConfig hand = wg::kHandRows[wgmma_sm90_hand_row(64, false, 3)];
  TunedEntry e{"d64.json", 64, false, {96, 3, 3, 32}, 1.05, false, false, 3};
  const std::string text = wgmma_tuned_file_text(h100, {e});
  const wg::TileConfig row = wgmma_sm90_row(e.genome, 64, false);
  EXPECT_EQ(row.row_speed, hand.row_speed);
  EXPECT_EQ(row.causal_row_speed, hand.causal_row_speed);
  char expect[160];
  std::snprintf(expect, sizeof expect, "{90, 132, {64, 96, 3, 3, 32, %d, %.17g, %.17g, false, false}},\n",
                row.consumer_regs, hand.row_speed, hand.causal_row_speed);
  EXPECT_NE(text.find(expect), std::string::npos) << text;
  EXPECT_NE(text.find("d64.json: 1.050x against the hand-made row"), std::string::npos) << text;
  EXPECT_TRUE(wg::valid(row));
}

}  // namespace
