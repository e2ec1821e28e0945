// Launch of mma_sm80's backward for one (dtype, config row): the pre-pass (D, zeroed dQ sums and turn
// counters), the main kernel (dK, dV, and dQ's sums), then the conversion of the dQ sums. Included by the instantiation
// files in inst/, one per (dtype, row).
#pragma once

#include <cuda_runtime.h>

#include "kernels/mma/bwd/bwd_dkdv_kernel.cuh"
#include "kernels/mma/bwd/bwd_prepass.cuh"

namespace evosdpa::detail::mma_sm80 {

template <typename Kernel>
cudaError_t launch_with_smem(Kernel kernel, int64_t blocks, int threads, int smem, const BackwardParams& bp,
                             const BwdWorkspace& ws, cudaStream_t stream) {
  if (blocks == 0) return cudaSuccess;
  // Above 48 KiB a block needs the opt-in (cheap, not a stream operation: safe in graph capture).
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  kernel<<<static_cast<unsigned>(blocks), threads, smem, stream>>>(bp, ws);
  return cudaGetLastError();
}

template <typename T, int kIndex>
cudaError_t launch_backward(const BackwardParams& bp, cudaStream_t stream) {
  constexpr BwdConfig cfg = kBwdConfigs[kIndex];
  constexpr int D = cfg.head_dim;
  const KernelParams& p = bp.fwd;
  const int64_t rows = static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q;
  const BwdWorkspace ws = bwd_workspace(bp.workspace, rows, D, !bp.fast, cfg.tile_m);

  launch_prepass<T, D>(bp, ws, stream);

  const int64_t k_blocks = (static_cast<int64_t>(p.seqlen_k) + cfg.block_n - 1) / cfg.block_n * p.batch * bp.heads_kv;
  constexpr int smem = DkdvSmem<D, cfg.tile_m, cfg.block_n>::kBytes;
  static_assert(smem == cfg.smem_bytes(sizeof(T)), "supports() checks the config's figure");
  const cudaError_t err = bp.fast ? launch_with_smem(bwd_dkdv_kernel<T, kIndex, false>, k_blocks, cfg.threads(), smem, bp, ws, stream)
                                  : launch_with_smem(bwd_dkdv_kernel<T, kIndex, true>, k_blocks, cfg.threads(), smem, bp, ws, stream);
  if (err != cudaSuccess) return err;
  launch_dq_convert<T, D>(bp, ws, stream);
  return cudaGetLastError();
}

}  // namespace evosdpa::detail::mma_sm80
