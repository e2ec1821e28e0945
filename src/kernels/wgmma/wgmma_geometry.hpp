// The Hopper kernel's launch geometry (a kernel parameter, built on the host per call): plain C++, so
// that evosdpa-tune's launches of run-time candidates (tune/evaluate_wgmma.cpp) build it as the library does.
#pragma once

#include "kernels/kernel_params.hpp"
#include "kernels/rtc_std.hpp"
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
  // DynamicSchedule's order (wgmma_scheduler.cuh): a sequence's heads in sections of `section` heads
  // whose K and V fit in kL2Budget together; with every sequence's q_blocks (no packed queries), the
  // items of a section and of a sequence.
  FastDiv section, section_items, sequence_items;
  int items;         // q_blocks * batch * heads_q

  // L2 for the K and V of the heads whose items run side by side: of the H100's 50 MB, what
  // FlashAttention-3's scheduler also leaves them (32 MiB), the rest for Q, O and other streams.
  static constexpr int64_t kL2Budget = int64_t{32} << 20;

  // Causal: the most heads (a divisor of heads_q, at least 1) whose K and V at seqlen_k keys fit in
  // kL2Budget, so that every section's long diagonal blocks start before its short ones. Non-causal:
  // one head, as every block of a head costs the same and head-by-head keeps one head's K and V hot
  // (H100, varlen bench, D=128 equal lengths: 0.97-1.00x the fixed deal head by head, 0.96-0.98x in
  // sections).
  static int section_heads(const KernelParams& p, int elem_bytes) {
    if (!p.causal) return 1;
    const int64_t per_head = int64_t{2} * p.seqlen_k * p.head_dim * elem_bytes;
    const int64_t fit = per_head > 0 ? kL2Budget / per_head : p.heads_q;
    int s = fit >= p.heads_q ? p.heads_q : fit >= 1 ? static_cast<int>(fit) : 1;
    while (p.heads_q % s != 0) --s;
    return s;
  }

  static Geometry of(const KernelParams& p, int block_m, int grid, int elem_bytes = 2) {
    Geometry g;
    const int q_blocks = (p.seqlen_q + block_m - 1) / block_m;
    const int section = section_heads(p, elem_bytes);
    g.section = FastDiv(section);
    g.section_items = FastDiv(q_blocks * section);
    g.sequence_items = FastDiv(q_blocks * p.heads_q);
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
