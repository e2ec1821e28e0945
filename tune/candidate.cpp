#include "candidate.hpp"

#include <nvrtc.h>

#include <cstdlib>
#include <memory>
#include <sstream>

#ifndef EVOSDPA_SOURCE_DIR
#error "EVOSDPA_SOURCE_DIR (the repository root) is set by tune/CMakeLists.txt"
#endif
#ifndef EVOSDPA_CUDA_INCLUDE_DIR
#error "EVOSDPA_CUDA_INCLUDE_DIR (the toolkit's include directory) is set by tune/CMakeLists.txt"
#endif

namespace evosdpa::tune {

namespace {

std::string row_initializer(const detail::wgmma_sm90::TileConfig& c) {
  std::ostringstream s;
  s.precision(17);
  s << "{" << c.head_dim << "," << c.block_n << "," << c.stages << "," << c.consumers << "," << c.producer_regs << ","
    << c.consumer_regs << "," << c.row_speed << "," << c.causal_row_speed << "," << (c.split_keys ? "true" : "false")
    << "," << (c.fp8 ? "true" : "false") << "," << (c.turns ? "true" : "false") << "}";
  return s.str();
}

std::string row_initializer(const detail::mma_sm80::TileConfig& c) {
  std::ostringstream s;
  s << "{" << c.head_dim << "," << c.warps << "," << c.m_tiles << "," << c.block_n << "," << c.min_blocks_per_sm
    << "," << (c.q_in_registers ? "true" : "false") << "," << (c.small_grid ? "true" : "false") << "}";
  return s.str();
}

struct ProgramDeleter {
  void operator()(nvrtcProgram* p) const {
    nvrtcDestroyProgram(p);
    delete p;
  }
};

}  // namespace

SourceTree SourceTree::of_build() {
  const char* root = std::getenv("EVOSDPA_SOURCE_DIR");
  const char* cuda = std::getenv("EVOSDPA_CUDA_INCLUDE_DIR");
  const std::string src_root = root != nullptr && *root != '\0' ? root : EVOSDPA_SOURCE_DIR;
  return {src_root + "/src", src_root + "/include", cuda != nullptr && *cuda != '\0' ? cuda : EVOSDPA_CUDA_INCLUDE_DIR};
}

std::string CompiledCandidate::gate() const {
  if (!ok) return "did not compile";
  if (resources.spill_store_bytes > 0 || resources.spill_load_bytes > 0)
    return "spills (" + std::to_string(resources.spill_store_bytes) + " bytes stored, " +
           std::to_string(resources.spill_load_bytes) + " loaded)";
  if (resources.stack_bytes > 0) return "a " + std::to_string(resources.stack_bytes) + "-byte stack frame";
  return {};
}

namespace {

// One kernel of the library's sources, `header` included, under EVOSDPA_TUNE_CANDIDATE=`row`.
CompiledCandidate compile_kernel(const std::string& header, const std::string& name, const std::string& row,
                                 const std::string& arch, const SourceTree& tree) {
  CompiledCandidate out;
  const std::string source = "#include \"" + header + "\"\n";
  std::unique_ptr<nvrtcProgram, ProgramDeleter> prog(new nvrtcProgram{});
  if (nvrtcCreateProgram(prog.get(), source.c_str(), "evosdpa_tune_candidate.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS) {
    out.error = "nvrtcCreateProgram failed";
    return out;
  }
  nvrtcAddNameExpression(*prog, name.c_str());
  const std::vector<std::string> options = {
      "-std=c++17",         "--gpu-architecture=" + arch,     "-I" + tree.src,     "-I" + tree.include,
      "-I" + tree.cuda_include + "/cccl", "-I" + tree.cuda_include, "-Xptxas", "-v",
      "-DEVOSDPA_TUNE_CANDIDATE=" + row, "-default-device"};
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  const nvrtcResult compiled = nvrtcCompileProgram(*prog, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(*prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) nvrtcGetProgramLog(*prog, log.data());
  if (!log.empty() && log.back() == '\0') log.pop_back();  // the size counts the terminator
  if (compiled != NVRTC_SUCCESS) {
    out.error = std::string(nvrtcGetErrorString(compiled)) + ":\n" + log;
    return out;
  }
  const char* lowered = nullptr;
  if (nvrtcGetLoweredName(*prog, name.c_str(), &lowered) == NVRTC_SUCCESS && lowered != nullptr) out.kernel = lowered;
  size_t cubin_size = 0;
  nvrtcGetCUBINSize(*prog, &cubin_size);
  out.cubin.resize(cubin_size);
  if (cubin_size > 0) nvrtcGetCUBIN(*prog, out.cubin.data());
  // ptxas -v in NVRTC's log; NVRTC compiles for one target, named in the log as it is by nvcc.
  std::istringstream in(log);
  for (const host::KernelResources& k : host::parse_ptxas_log(in))
    if (k.function == out.kernel) out.resources = k;
  out.ok = !out.kernel.empty() && !out.cubin.empty() && out.resources.function == out.kernel;
  if (!out.ok) out.error = "no ptxas report for " + out.kernel + " in NVRTC's log:\n" + log;
  return out;
}

}  // namespace

CompiledCandidate compile_mma_sm80(const detail::mma_sm80::TileConfig& row, evosdpa_dtype_t dtype,
                                   const std::string& arch, const SourceTree& tree) {
  const std::string type = dtype == EVOSDPA_DTYPE_BFLOAT16 ? "__nv_bfloat16" : "__half";
  return compile_kernel("kernels/mma/mma_kernel.cuh", "&evosdpa::detail::mma_sm80::attention_kernel<" + type + ", 0>",
                        row_initializer(row), arch, tree);
}

CompiledCandidate compile_wgmma_sm90(const detail::wgmma_sm90::TileConfig& row, evosdpa_dtype_t dtype,
                                     const SourceTree& tree) {
  const std::string type = dtype == EVOSDPA_DTYPE_BFLOAT16 ? "__nv_bfloat16" : "__half";
  const std::string ns = "evosdpa::detail::wgmma_sm90::";
  // The kernel the library runs for the tune grids' padded calls on this row (kCallSequences, wgmma_launch.cuh).
  const std::string seqs = std::string("evosdpa::detail::") + (row.split_keys || row.fp8 ? "CallSequences" : "OwnSequences");
  return compile_kernel("kernels/wgmma/wgmma_kernel.cuh",
                        "&" + ns + "attention_kernel<" + type + ", 0, " + ns + "PersistentSchedule<0, evosdpa::detail::NoMods, " +
                            seqs + ">, " + ns + "StoreEpilogue<" + type + ", 0, " + seqs + ">>",
                        row_initializer(row), "sm_90a", tree);
}

}  // namespace evosdpa::tune
