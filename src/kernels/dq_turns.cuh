// DETERMINISTIC mode's turns for the backward passes' dQ sums (mma_sm80 and wgmma_sm90): a counter per
// query tile in the workspace orders the key blocks' adds to the tile, so every run sums in the same order.
#pragma once

#include "kernels/rtc_std.hpp"

namespace evosdpa::detail {

// DETERMINISTIC mode's turns: the block waits until `turn` (a counter in global memory) reaches its
// rank, adds, then passes the turn. One thread polls with acquire and passes with release at GPU scope;
// the block barriers around order every thread's adds between the two (CUTLASS's generic barrier).
__device__ __forceinline__ void wait_turn(const int* turn, int rank) {
  int v;
  do {
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(turn) : "memory");
  } while (v != rank);
}

__device__ __forceinline__ void pass_turn(int* turn) {
  asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(turn) : "memory");
}

}  // namespace evosdpa::detail
