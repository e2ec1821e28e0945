// cuDNN's fused SDPA forward, called directly through the cudnn_frontend graph API, as a peer in
// evosdpa-bench. libcudnn is loaded at run time (dlopen), so the benchmark runs where it is missing and
// reports the peer as unavailable.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "bench_options.hpp"

namespace evosdpa::bench {

class CudnnSdpa {
 public:
  // Loads libcudnn.so.9 (EVOSDPA_CUDNN_LIBRARY, else the loader's search path) and makes a handle.
  static std::unique_ptr<CudnnSdpa> create(std::string& why_not);
  ~CudnnSdpa();

  // Builds the graph for one shape (BHSD contiguous, lse not produced); false with the reason when
  // cuDNN has no engine for it. FP8 (E4M3) inputs take cuDNN's sdpa_fp8, whose Hopper engines write O
  // in E4M3 only: stored O = real O * o_scale (o_scale is unused for 16-bit inputs).
  bool prepare(const BenchShape& s, float o_scale, std::string& why_not);
  // Enqueues one forward on `stream`; false with the reason on failure. descales: FP8 inputs' q, k and v
  // descales (three device floats), else unused.
  bool run(const void* q, const void* k, const void* v, void* o, const float* descales, cudaStream_t stream,
           std::string& why_not);

  struct State;

 private:
  explicit CudnnSdpa(std::unique_ptr<State> s);
  std::unique_ptr<State> state_;
};

}  // namespace evosdpa::bench
