#include "spaces.hpp"

#include <string>

namespace evosdpa::tune {

namespace mma = detail::mma_sm80;
namespace wg = detail::wgmma_sm90;

namespace {
constexpr int kMmaSmemLimit = 99 * 1024;  // sm_86/sm_89's per-block opt-in limit, which the table keeps to
}

GenomeSpace mma_sm80_space(int head_dim, bool small_grid) {
  GenomeSpace s;
  s.family = "mma_sm80/d" + std::to_string(head_dim) + (small_grid ? "/small_grid" : "");
  s.levers = {{"warps", {2, 4, 8}},
              {"m_tiles", {1, 2, 3, 4}},
              {"block_n", {32, 64, 128}},
              {"min_blocks_per_sm", {1, 2, 3}},
              {"q_in_registers", {0, 1}}};
  s.invalid_reason = [head_dim, small_grid](const Genome& g) -> std::string {
    const mma::TileConfig c = mma_sm80_config(g, head_dim, small_grid);
    if (!mma::valid(c)) return "fails mma_sm80::valid (tile copies in whole 16-byte rounds, k-steps of 16)";
    if (c.smem_bytes() > kMmaSmemLimit)
      return "shared memory " + std::to_string(c.smem_bytes()) + " > " + std::to_string(kMmaSmemLimit) + " bytes";
    return {};
  };
  return s;
}

mma::TileConfig mma_sm80_config(const Genome& g, int head_dim, bool small_grid) {
  return {head_dim, g[0], g[1], g[2], g[3], g[4] != 0, small_grid};
}

Genome mma_sm80_genome(const mma::TileConfig& c) {
  return {c.warps, c.m_tiles, c.block_n, c.min_blocks_per_sm, c.q_in_registers ? 1 : 0};
}

std::vector<Genome> mma_sm80_table(int head_dim, bool small_grid) {
  std::vector<Genome> out;
  for (const mma::TileConfig& c : mma::kHandRows)  // the hand-made rows, not a tuned table's
    if (c.head_dim == head_dim && c.small_grid == small_grid) out.push_back(mma_sm80_genome(c));
  return out;
}

GenomeSpace wgmma_sm90_space(int head_dim, bool split_keys, int consumers) {
  GenomeSpace s;
  s.family = "wgmma_sm90/d" + std::to_string(head_dim) + "/c" + std::to_string(consumers) +
             (split_keys ? "/split_keys" : "");
  // consumers names the bucket (selection weighs rows of each count by their measured row speeds), so it
  // has one legal value here and mutation leaves it.
  s.levers = {{"block_n", {64, 96, 128, 160, 176, 192, 224, 256}},
              {"stages", {2, 3, 4}},
              {"consumers", {consumers}},
              {"producer_regs", {24, 32, 40}}};
  s.invalid_reason = [head_dim, split_keys](const Genome& g) -> std::string {
    if (!wg::valid(wgmma_sm90_config(g, head_dim, split_keys)))
      return "fails wgmma_sm90::valid (shared memory, registers, tile alignment)";
    return {};
  };
  return s;
}

wg::TileConfig wgmma_sm90_config(const Genome& g, int head_dim, bool split_keys) {
  const int consumers = g[2], producer = g[3];
  wg::TileConfig c{head_dim, g[0], g[1], consumers, producer, 0, 1.0, 1.0, split_keys};
  // What the CTA is launched with, less the producer's share: setmaxnreg moves registers only within it
  // (a claim beyond it hangs), so the 64K of the register file is not the bound.
  c.consumer_regs = (c.threads() * c.launch_regs() / 128 - producer) / consumers / 8 * 8;
  return c;
}

Genome wgmma_sm90_genome(const wg::TileConfig& c) { return {c.block_n, c.stages, c.consumers, c.producer_regs}; }

std::vector<Genome> wgmma_sm90_table(int head_dim, bool split_keys, int consumers) {
  std::vector<Genome> out;
  for (const wg::TileConfig& c : wg::kHandRows)  // the hand-made rows, not a tuned table's
    if (c.head_dim == head_dim && c.split_keys == split_keys && c.consumers == consumers && !c.fp8)
      out.push_back(wgmma_sm90_genome(c));  // FP8 rows: not in this space yet
  return out;
}

int wgmma_sm90_hand_row(int head_dim, bool split_keys, int consumers) {
  for (int i = 0; i < wg::kHandCount; ++i) {
    const wg::TileConfig& c = wg::kHandRows[i];
    if (c.head_dim == head_dim && c.split_keys == split_keys && c.consumers == consumers && !c.fp8) return i;
  }
  return -1;
}

wg::TileConfig wgmma_sm90_row(const Genome& g, int head_dim, bool split_keys) {
  wg::TileConfig c = wgmma_sm90_config(g, head_dim, split_keys);
  const int hand = wgmma_sm90_hand_row(head_dim, split_keys, c.consumers);
  if (hand >= 0) c.row_speed = wg::kHandRows[hand].row_speed, c.causal_row_speed = wg::kHandRows[hand].causal_row_speed;
  return c;
}

}  // namespace evosdpa::tune
