// The order in which the Hopper kernel's persistent grid takes its work items (query blocks of one
// (batch, head)): item `index` of it is query block `qb` of flattened head `bh`. CTA b of a grid of G
// takes items b, b + G, b + 2G, ... Plain C++ (host and device), so that the CPU tests check the order
// is a permutation of the items and that it keeps the CTAs' loads even.
//  - Non-causal: the query blocks of one head side by side: they read the same K and V through L2.
//  - Causal: an item's length grows with its query block, so blocks are paired, the last with the first
//    (Q-1-p with p, both of one head), and one CTA runs both members of a pair: in each round of G pairs
//    the G long members come first, then the G short ones, so stride G gives a CTA both. Every pair has
//    about the same length and the CTAs' totals even out (tests/cpu/test_wgmma_order.cpp measures the
//    busiest CTA's load against the mean on the fa3 grid: 0.94-0.97, where longest-block-first gave
//    0.81-0.89 with plain striding and down to 0.74 with alternating directions). Pairs of one head are consecutive, so a round's pairs cover few
//    heads and their K and V stay in L2. With an odd block count each head's middle block is left over;
//    these, the shortest whole-length items, come last.
#pragma once

#if defined(__CUDACC__)
#define EVOSDPA_HOST_DEVICE __host__ __device__
#else
#define EVOSDPA_HOST_DEVICE
#endif

namespace evosdpa::detail::wgmma_sm90 {

struct BlockOfHead {
  int qb, bh;
};

// q_blocks * heads items (< 2^31), grid >= 1.
EVOSDPA_HOST_DEVICE inline BlockOfHead item_order(int index, int q_blocks, int heads, int grid, bool causal) {
  if (!causal) return {index % q_blocks, index / q_blocks};
  const int per_head = q_blocks / 2;
  const int pairs = heads * per_head;
  if (index >= 2 * pairs) return {q_blocks / 2, index - 2 * pairs};  // the middle blocks of an odd count
  const int round = index / (2 * grid), within = index % (2 * grid);
  const int in_round = pairs - round * grid < grid ? pairs - round * grid : grid;  // the last may hold fewer
  const bool is_long = within < in_round;
  const int pair = round * grid + (is_long ? within : within - in_round);
  const int p = pair % per_head;
  return {is_long ? q_blocks - 1 - p : p, pair / per_head};
}

}  // namespace evosdpa::detail::wgmma_sm90
