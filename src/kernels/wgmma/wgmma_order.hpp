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

#include "kernels/wgmma/fast_div.hpp"

namespace evosdpa::detail::wgmma_sm90 {

struct BlockOfHead {
  int qb, bh;
};

// q_blocks * heads items (< 2^31), grid >= 1. The divisors are the launch's, built once on the host
// (fast_div.hpp): a CTA computes its items with multiplications only.
class ItemOrder {
 public:
  ItemOrder() = default;
  EVOSDPA_HOST_DEVICE ItemOrder(int q_blocks, int heads, int grid, bool causal)
      : q_blocks_(q_blocks), per_head_(q_blocks / 2), round_(2 * grid), heads_(heads), grid_(grid), causal_(causal) {}

  EVOSDPA_HOST_DEVICE BlockOfHead operator()(int index) const {
    if (!causal_) {
      const QuotRem at = q_blocks_.divmod(index);
      return {at.rem, at.quot};
    }
    const int pairs = heads_ * per_head_.divisor();
    if (index >= 2 * pairs) return {q_blocks_.divisor() / 2, index - 2 * pairs};  // the middle blocks of an odd count
    const QuotRem rw = round_.divmod(index);
    const int round = rw.quot, within = rw.rem;
    const int in_round = pairs - round * grid_ < grid_ ? pairs - round * grid_ : grid_;  // the last may hold fewer
    const bool is_long = within < in_round;
    const int pair = round * grid_ + (is_long ? within : within - in_round);
    const QuotRem hp = per_head_.divmod(pair);
    return {is_long ? q_blocks_.divisor() - 1 - hp.rem : hp.rem, hp.quot};
  }

 private:
  FastDiv q_blocks_;  // query blocks per head
  FastDiv per_head_;  // causal pairs per head (0 with a single block: never divided by then)
  FastDiv round_;     // items per round of the causal order: G long members, then G short ones
  int heads_ = 1, grid_ = 1;
  bool causal_ = false;
};

}  // namespace evosdpa::detail::wgmma_sm90
