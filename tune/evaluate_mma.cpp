#include "evaluate_mma.hpp"

#include "candidate.hpp"
#include "spaces.hpp"

namespace evosdpa::tune {

namespace mma = detail::mma_sm80;

MmaEvaluator::MmaEvaluator(int head_dim, bool small_grid, Workload workload)
    : Evaluator(std::move(workload)), head_dim_(head_dim), small_grid_(small_grid) {}

std::string MmaEvaluator::baseline(Genome& out) const {
  for (const host::Shape& s : workload_.shapes)
    if (s.head_dim != head_dim_) return "a workload shape has head_dim " + std::to_string(s.head_dim);
  const std::vector<Genome> table = mma_sm80_table(head_dim_, small_grid_);
  if (table.empty()) return "no table row for this head_dim and variant";
  out = table.front();
  return {};
}

std::string MmaEvaluator::load(const Genome& g, const std::string& arch, CandidateRunner& runner) {
  const mma::TileConfig row = mma_sm80_config(g, head_dim_, small_grid_);
  return gate_and_load(compile_mma_sm80(row, workload_.dtype, arch), row.threads(), row.smem_bytes(), runner);
}

std::string MmaEvaluator::bind(const Genome& g, const Problem& p, KernelLaunch& out) {
  const mma::TileConfig row = mma_sm80_config(g, head_dim_, small_grid_);
  auto params = std::make_shared<detail::KernelParams>(p.params);
  out.grid = (p.shape.seqlen_q + row.block_m() - 1) / row.block_m() * p.shape.batch * p.shape.heads_q;
  out.args = {params.get()};
  out.storage = params;
  return {};
}

}  // namespace evosdpa::tune
