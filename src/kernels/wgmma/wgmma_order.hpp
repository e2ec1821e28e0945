// The order in which the Hopper kernel's persistent grid takes its work items (query blocks of one
// (batch, head)): item `index` of it is query block `qb` of flattened head `bh`. CTA b of a grid of G
// takes items b, b + G, b + 2G, ... Plain C++ (host and device), so that the CPU tests check the order
// is a permutation of the items and that it keeps the CTAs' loads even.
//  - Non-causal: the query blocks of one head side by side: they read the same K and V through L2. A
//    round (G consecutive items, run side by side) is rotated among the CTAs by k * shift in round k, so
//    that each CTA's items go through every query block: where G is a multiple of the block count Q,
//    plain striding gave CTA b block b mod Q in every round, and the last block, short where block_m
//    does not divide L (three-consumer 192-row items at L = 2^n: 64 or 128 rows), went to the same
//    CTAs each time, the busiest CTAs taking only whole blocks ((16,32,1024,64) on 132 SMs: 22 CTAs ran
//    the 512 short blocks, 110 the 2,560 whole ones).
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
      : q_blocks_(q_blocks),
        per_head_(q_blocks / 2),
        round_(causal ? 2 * grid : grid),
        heads_(heads),
        grid_(grid),
        causal_(causal),
        full_rounds_(q_blocks * heads / grid),
        shift_(causal ? 0 : round_shift(q_blocks, grid)) {}

  EVOSDPA_HOST_DEVICE BlockOfHead operator()(int index) const {
    if (!causal_) {
      const QuotRem at = q_blocks_.divmod(rotated(index));
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

  // The non-causal rounds' rotation step: CTA b's block in round k is (b + k (G + shift)) mod Q (up to the
  // rotation's wrap past G), so it visits every block when G + shift and Q are coprime: the least such
  // shift >= 0 (0, plain striding, where G and Q already are; 1 where Q divides G). Coprimes lie close
  // together (1 mod Q is one), so the search ends within a few steps; 0 past 64.
  static EVOSDPA_HOST_DEVICE int round_shift(int q_blocks, int grid) {
    if (q_blocks <= 1) return 0;
    for (int shift = 0; shift < 64; ++shift) {
      int a = (grid % q_blocks + shift) % q_blocks, b = q_blocks;  // gcd(a, b) by Euclid
      while (a != 0) {
        const int r = b % a;
        b = a;
        a = r;
      }
      if (b == 1) return shift;
    }
    return 0;
  }

 private:
  // Non-causal item `index` after its round's rotation: position w of round k (a full round: k below
  // full_rounds_) becomes (w + k shift) mod G; a partial last round stays as it is (its CTAs are the first
  // ones, as PersistentSchedule::items counts them).
  EVOSDPA_HOST_DEVICE int rotated(int index) const {
    if (shift_ == 0) return index;
    const QuotRem kw = round_.divmod(index);
    if (kw.quot >= full_rounds_) return index;
    int w = kw.rem + round_.divmod(round_.divmod(kw.quot).rem * shift_).rem;  // (k mod G) shift < 64 G
    if (w >= grid_) w -= grid_;
    return index - kw.rem + w;
  }

  FastDiv q_blocks_;  // query blocks per head
  FastDiv per_head_;  // causal pairs per head (0 with a single block: never divided by then)
  FastDiv round_;     // items per round: causal G long members, then G short ones; non-causal G
  int heads_ = 1, grid_ = 1;
  bool causal_ = false;
  int full_rounds_ = 0;  // non-causal: rounds of G items
  int shift_ = 0;        // non-causal: round_shift
};

}  // namespace evosdpa::detail::wgmma_sm90
