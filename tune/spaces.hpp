// The genome spaces of the kernel families (issue 10): each family's levers with their legal values, the
// family's own static rules as the validity check (its constexpr valid() and the shared-memory limit),
// and the rows of its hand-made tile table as genomes, the search's starting population.
#pragma once

#include <vector>

#include "genome.hpp"
#include "kernels/mma/mma_config.hpp"
#include "kernels/wgmma/wgmma_config.hpp"

namespace evosdpa::tune {

// mma_sm80 for one head dim and variant (default or small-grid): warps, m_tiles, block_n,
// min_blocks_per_sm, q_in_registers; valid() and 99 KiB of shared memory (sm_86/sm_89's opt-in limit).
GenomeSpace mma_sm80_space(int head_dim, bool small_grid);
detail::mma_sm80::TileConfig mma_sm80_config(const Genome& g, int head_dim, bool small_grid);
Genome mma_sm80_genome(const detail::mma_sm80::TileConfig& c);
std::vector<Genome> mma_sm80_table(int head_dim, bool small_grid);

// wgmma_sm90 for one bucket of its table (head dim, split_keys, consumer count): block_n, stages,
// consumers (the bucket's, fixed), producer_regs; each consumer takes the registers the producer leaves of
// the CTA's launch allocation (rounded down to setmaxnreg's multiple of 8); valid().
GenomeSpace wgmma_sm90_space(int head_dim, bool split_keys, int consumers);
detail::wgmma_sm90::TileConfig wgmma_sm90_config(const Genome& g, int head_dim, bool split_keys);
Genome wgmma_sm90_genome(const detail::wgmma_sm90::TileConfig& c);
std::vector<Genome> wgmma_sm90_table(int head_dim, bool split_keys, int consumers);
// The bucket's hand-made row (index in kHandRows), -1 if none; the row a genome makes with the bucket's
// measured row speeds (what a tuned table holds, so that selection weighs it as the row it replaces).
int wgmma_sm90_hand_row(int head_dim, bool split_keys, int consumers);
detail::wgmma_sm90::TileConfig wgmma_sm90_row(const Genome& g, int head_dim, bool split_keys);

}  // namespace evosdpa::tune
