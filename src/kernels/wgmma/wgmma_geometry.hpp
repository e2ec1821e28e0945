// The Hopper kernel's launch geometry (a kernel parameter, built on the host per call): plain C++, so
// that evosdpa-tune's launches of run-time candidates (tune/evaluate_wgmma.cpp) build it as the library does.
#pragma once

#include "kernels/kernel_params.hpp"
#include "kernels/wgmma/fast_div.hpp"
#include "kernels/wgmma/wgmma_order.hpp"

namespace evosdpa::detail::wgmma_sm90 {

// The launch's divisors, found once on the host and passed as a kernel parameter (fast_div.hpp): the
// schedules and the producer divide by nothing else.
struct Geometry {
  ItemOrder order;   // the persistent grid's item order
  FastDiv q_blocks;  // query blocks of block_m rows per head
  FastDiv heads_q;   // flattened head -> (batch, head)
  FastDiv kv_group;  // query head -> K/V head
  FastDiv grid;      // CTAs of the launch
  int items;         // q_blocks * batch * heads_q

  static Geometry of(const KernelParams& p, int block_m, int grid) {
    Geometry g;
    const int q_blocks = (p.seqlen_q + block_m - 1) / block_m;
    g.items = q_blocks * p.batch * p.heads_q;
    g.order = ItemOrder(q_blocks, p.batch * p.heads_q, grid, p.causal != 0);
    g.q_blocks = FastDiv(q_blocks);
    g.heads_q = FastDiv(p.heads_q);
    g.kv_group = FastDiv(p.kv_group);
    g.grid = FastDiv(grid);
    return g;
  }
};

}  // namespace evosdpa::detail::wgmma_sm90
