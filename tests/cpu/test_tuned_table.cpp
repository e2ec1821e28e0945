// evosdpa-tune's tuned table (issue 10): which genome a search puts in its model's table, and the file
// the build compiles (its rows parse as mma_config.hpp's TunedRow and pass the family's rules).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "kernels/mma/mma_config.hpp"
#include "search.hpp"
#include "spaces.hpp"
#include "tuned_table.hpp"

using namespace evosdpa::tune;
namespace mma = evosdpa::detail::mma_sm80;

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

}  // namespace
