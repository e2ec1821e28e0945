// A candidate of evosdpa-tune compiled at run time: NVRTC builds the library's own kernel source with the
// candidate's tile row in place of the family's table (EVOSDPA_TUNE_CANDIDATE, see mma_config.hpp and
// wgmma_config.hpp), so
// the search is not limited to the instantiations in the binary and there is no second copy of the
// kernel. The ptxas report (registers, spills, stack) says whether the candidate may be timed at all.
#pragma once

#include <string>
#include <vector>

#include "evosdpa/evosdpa.h"
#include "host/ptxas_report.hpp"
#include "kernels/mma/mma_config.hpp"
#include "kernels/wgmma/wgmma_config.hpp"

namespace evosdpa::tune {

struct CompiledCandidate {
  bool ok = false;
  std::string error;                 // NVRTC's log when the compilation failed
  std::string kernel;                // the lowered (mangled) name of the kernel in the cubin
  std::vector<char> cubin;
  host::KernelResources resources;   // from ptxas -v
  // "" when the gate of the build (no spills, no stack frame) accepts it; else why not.
  std::string gate() const;
};

// Where NVRTC finds the sources: the repository's src/ and include/, the toolkit's include directory
// (and its cccl/ for libcu++). Set at build time for this tree (EVOSDPA_SOURCE_DIR, CUDA include); the
// environment variables EVOSDPA_SOURCE_DIR and EVOSDPA_CUDA_INCLUDE_DIR override them where the tool runs
// away from the tree it was built in (a copy of the repository on a GPU machine).
struct SourceTree {
  std::string src, include, cuda_include;
  static SourceTree of_build();
};

// mma_sm80's kernel for `row` (fp16 or bf16) compiled for `arch` ("sm_80", "sm_90", ...).
CompiledCandidate compile_mma_sm80(const detail::mma_sm80::TileConfig& row, evosdpa_dtype_t dtype,
                                   const std::string& arch, const SourceTree& tree = SourceTree::of_build());

// wgmma_sm90's persistent-grid kernel for `row` (fp16 or bf16), for sm_90a (the family's only target),
// with `row` as the whole table (wgmma_config.hpp), so its split_keys flag picks the split_keys kernel.
CompiledCandidate compile_wgmma_sm90(const detail::wgmma_sm90::TileConfig& row, evosdpa_dtype_t dtype,
                                     const SourceTree& tree = SourceTree::of_build());

}  // namespace evosdpa::tune
