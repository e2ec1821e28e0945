#include "candidate_runner.hpp"

namespace evosdpa::tune {

namespace {

template <typename F>
F driver_entry(const char* name) {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult status{};
  if (cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &status) != cudaSuccess ||
      status != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<F>(f);
}

struct Driver {
  decltype(&cuModuleLoadData) load = driver_entry<decltype(&cuModuleLoadData)>("cuModuleLoadData");
  decltype(&cuModuleGetFunction) get = driver_entry<decltype(&cuModuleGetFunction)>("cuModuleGetFunction");
  decltype(&cuFuncSetAttribute) set = driver_entry<decltype(&cuFuncSetAttribute)>("cuFuncSetAttribute");
  decltype(&cuLaunchKernel) launch = driver_entry<decltype(&cuLaunchKernel)>("cuLaunchKernel");
  decltype(&cuModuleUnload) unload = driver_entry<decltype(&cuModuleUnload)>("cuModuleUnload");
  bool ok() const { return load && get && set && launch && unload; }
};

const Driver& driver() {
  static const Driver d;
  return d;
}

}  // namespace

std::string CandidateRunner::load(const CompiledCandidate& c, int threads, int smem) {
  const Driver& d = driver();
  if (!d.ok()) return "the CUDA driver's module entry points are unavailable";
  if (!c.ok) return "candidate did not compile";
  if (d.load(&module_, c.cubin.data()) != CUDA_SUCCESS) return "cuModuleLoadData failed (cubin for another arch?)";
  if (d.get(&function_, module_, c.kernel.c_str()) != CUDA_SUCCESS) return "kernel " + c.kernel + " not in the cubin";
  if (d.set(function_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem) != CUDA_SUCCESS)
    return "cannot allow " + std::to_string(smem) + " bytes of dynamic shared memory";
  threads_ = threads;
  smem_ = smem;
  return {};
}

cudaError_t CandidateRunner::launch(void** args, long long blocks, cudaStream_t stream) const {
  const CUresult r = driver().launch(function_, static_cast<unsigned>(blocks), 1, 1, static_cast<unsigned>(threads_), 1,
                                     1, static_cast<unsigned>(smem_), reinterpret_cast<CUstream>(stream), args, nullptr);
  return r == CUDA_SUCCESS ? cudaGetLastError() : cudaErrorLaunchFailure;
}

CandidateRunner::~CandidateRunner() {
  if (module_ != nullptr) driver().unload(module_);
}

}  // namespace evosdpa::tune
