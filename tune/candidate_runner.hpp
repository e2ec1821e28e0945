// Runs a compiled candidate (candidate.hpp) on the GPU: its cubin loaded with the driver API (reached
// through cudaGetDriverEntryPoint, as the library reaches cuTensorMapEncodeTiled: cudart is static).
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <string>

#include "candidate.hpp"

namespace evosdpa::tune {

class CandidateRunner {
 public:
  CandidateRunner() = default;
  CandidateRunner(const CandidateRunner&) = delete;
  CandidateRunner& operator=(const CandidateRunner&) = delete;
  // Loads the candidate's cubin on the current device for launches of `threads` threads and `smem` bytes
  // of dynamic shared memory per block; "" or why not.
  std::string load(const CompiledCandidate& c, int threads, int smem);
  // One launch over `blocks` blocks with the kernel's arguments (cuLaunchKernel's array of pointers).
  cudaError_t launch(void** args, long long blocks, cudaStream_t stream) const;
  ~CandidateRunner();

 private:
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  int threads_ = 0, smem_ = 0;
};

}  // namespace evosdpa::tune
