#include "evaluate_wgmma.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "candidate.hpp"
#include "kernels/wgmma/cu_tensor_map.hpp"
#include "kernels/wgmma/tma_map.hpp"
#include "kernels/wgmma/wgmma_geometry.hpp"
#include "spaces.hpp"

namespace evosdpa::tune {

namespace wg = detail::wgmma_sm90;

namespace {

// The kernel's arguments (wgmma_kernel.cuh: attention_kernel's parameters, in order).
struct WgmmaArgs {
  CUtensorMap tq, tk, tv, to;
  wg::MaskMap<false> no_mask;  // the tuner's kernels have no mask tensor
  detail::KernelParams p;
  wg::Geometry geo;
};

}  // namespace

WgmmaEvaluator::WgmmaEvaluator(int head_dim, bool split_keys, int consumers, Workload workload)
    : Evaluator(std::move(workload)), head_dim_(head_dim), consumers_(consumers), split_keys_(split_keys) {}

std::string WgmmaEvaluator::baseline(Genome& out) const {
  for (const host::Shape& s : workload_.shapes)
    if (s.head_dim != head_dim_) return "a workload shape has head_dim " + std::to_string(s.head_dim);
  const std::vector<Genome> table = wgmma_sm90_table(head_dim_, split_keys_, consumers_);
  if (table.empty()) return "no table row for this head_dim, consumer count and split";
  out = table.front();
  return {};
}

std::string WgmmaEvaluator::load(const Genome& g, const std::string&, CandidateRunner& runner) {
  const wg::TileConfig row = wgmma_sm90_row(g, head_dim_, split_keys_);
  return gate_and_load(compile_wgmma_sm90(row, workload_.dtype), row.threads(), row.smem_bytes(), runner);
}

std::string WgmmaEvaluator::bind(const Genome& g, const Problem& pr, KernelLaunch& out) {
  const wg::TileConfig row = wgmma_sm90_row(g, head_dim_, split_keys_);
  const detail::KernelParams& p = pr.params;
  const CUtensorMapDataType dtype =
      workload_.dtype == EVOSDPA_DTYPE_BFLOAT16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  std::shared_ptr<WgmmaArgs> a(new WgmmaArgs{});  // over-aligned (CUtensorMap): C++17's aligned new
  a->p = p;
  const int heads_kv = p.heads_q / p.kv_group;
  cudaError_t err = wg::encode_tensor_map(
      a->tq, {p.q, p.batch, p.heads_q, p.seqlen_q, p.head_dim, p.q_batch_stride, p.q_head_stride, p.q_seq_stride}, dtype,
      row.block_m(), row.row_bytes());
  if (err == cudaSuccess)
    err = wg::encode_tensor_map(
        a->to, {p.o, p.batch, p.heads_q, p.seqlen_q, p.head_dim, p.o_batch_stride, p.o_head_stride, p.o_seq_stride},
        dtype, 64);
  if (err == cudaSuccess && p.seqlen_k > 0)
    err = wg::encode_tensor_map(
        a->tk, {p.k, p.batch, heads_kv, p.seqlen_k, p.head_dim, p.k_batch_stride, p.k_head_stride, p.k_seq_stride},
        dtype, row.block_n, row.row_bytes());
  if (err == cudaSuccess && p.seqlen_k > 0)
    err = wg::encode_tensor_map(
        a->tv, {p.v, p.batch, heads_kv, p.seqlen_k, p.head_dim, p.v_batch_stride, p.v_head_stride, p.v_seq_stride},
        dtype, row.block_n, row.row_bytes());
  if (p.seqlen_k == 0) a->tk = a->tv = a->tq;  // no key tile is loaded (as wgmma_launch.cuh)
  if (err != cudaSuccess) return std::string("tensor map: ") + cudaGetErrorString(err);
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return "no device attributes";
  const long long items =
      (static_cast<long long>(p.seqlen_q) + row.block_m() - 1) / row.block_m() * p.batch * p.heads_q;
  out.grid = row.split_keys ? items : std::min<long long>(items, sms);
  a->geo = wg::Geometry::of(p, row.block_m(), static_cast<int>(out.grid));
  out.args = {&a->tq, &a->tk, &a->tv, &a->to, &a->no_mask, &a->p, &a->geo};
  out.storage = a;
  return {};
}

}  // namespace evosdpa::tune
