#include "host/ptxas_report.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include "kernels/mma/bwd/bwd_config.hpp"
#include "kernels/mma/mma_config.hpp"
#include "kernels/mma_fp8/mma_fp8_config.hpp"
#include "kernels/splitkv/splitkv_config.hpp"
#include "kernels/wgmma/wgmma_config.hpp"

namespace evosdpa::host {
namespace {

// The launch shape of row `row` of a family's tile table, when the row exists.
// `table`: a tile table (an array, or a family's RowTable) of `count` rows.
template <typename Table>
void from_table(KernelResources& k, int row, const Table& table, int count) {
  if (row < 0 || row >= count) return;
  k.threads_per_block = table[row].threads();
  k.dynamic_smem_bytes = table[row].smem_bytes();
}

// mma_sm80's backward kernels: the dK/dV kernel names a row of kBwdConfigs; the elementwise passes
// have a fixed block.
void fill_backward_shape(KernelResources& k) {
  namespace m80 = detail::mma_sm80;
  if (k.function.find("bwd_prepass_kernel") != std::string::npos ||
      k.function.find("bwd_dq_convert_kernel") != std::string::npos) {
    k.threads_per_block = m80::kPrepassThreads;
    return;
  }
  std::smatch m;
  if (k.function.find("bwd_dkdv_kernel") == std::string::npos ||
      !std::regex_search(k.function, m, std::regex("Li([0-9]+)E")))
    return;
  const int row = std::stoi(m[1]);
  if (row < 0 || row >= m80::kBwdConfigCount) return;
  // Below its row's min_arch the kernel is a trap that selection never launches: no launch shape.
  if (std::stoi(k.arch.substr(3)) < m80::kBwdConfigs[row].min_arch) return;
  k.threads_per_block = m80::kBwdConfigs[row].threads();
  k.dynamic_smem_bytes = m80::kBwdConfigs[row].smem_bytes(m80::kElemBytes);
}

// Threads and dynamic shared memory of our kernels, recovered from the mangled name: attention_kernel's
// template arguments name the tile-table row (the integer one).
void fill_launch_shape(KernelResources& k) {
  if (k.function.find("reference_") != std::string::npos) {  // reference_kernel and its backward's
    k.threads_per_block = 128;
    return;
  }
  if (k.function.find("mma_sm80") != std::string::npos && k.function.find("bwd_") != std::string::npos) {
    fill_backward_shape(k);
    return;
  }
  std::smatch m;
  if (k.function.find("splitkv") != std::string::npos) {  // the split-KV kernel (16-bit rows) and its merge
    namespace skv = detail::splitkv;
    if (k.function.find("merge_kernel") != std::string::npos) {
      k.threads_per_block = 128;
    } else if (std::regex_search(k.function, m, std::regex("Li([0-9]+)E"))) {
      const int row = std::stoi(m[1]);
      if (row < 0 || row >= skv::kConfigCount) return;
      k.threads_per_block = skv::kConfigs[row].threads();
      k.dynamic_smem_bytes = skv::kConfigs[row].smem_bytes(2);
    }
    return;
  }
  if (k.function.find("attention_kernel") == std::string::npos ||
      !std::regex_search(k.function, m, std::regex("Li([0-9]+)E")))
    return;
  const int row = std::stoi(m[1]);
  if (k.function.find("wgmma_sm90") != std::string::npos)
    from_table(k, row, detail::wgmma_sm90::kConfigs, detail::wgmma_sm90::kConfigCount);
  else if (k.function.find("mma_sm80") != std::string::npos)
    from_table(k, row, detail::mma_sm80::kConfigs, detail::mma_sm80::kConfigCount);
  else if (k.function.find("mma_fp8") != std::string::npos)
    from_table(k, row, detail::mma_fp8::kConfigs, detail::mma_fp8::kConfigCount);
}

}  // namespace

std::vector<KernelResources> parse_ptxas_log(std::istream& in) {
  static const std::regex entry(R"(Compiling entry function '([^']+)' for '(sm_[0-9a-z]+)')");
  static const std::regex frame(R"(([0-9]+) bytes stack frame, ([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads)");
  static const std::regex used(R"(Used ([0-9]+) registers)");
  static const std::regex smem(R"(([0-9]+) bytes smem)");
  // A note naming its function, before or after the function's entry in the log.
  static const std::regex serialized(R"(wgmma\.mma_async instructions are serialized (.*) in the function '([^']+)')");
  std::vector<KernelResources> out;
  std::map<std::string, std::string> serialized_why;  // function -> reason
  std::string line;
  KernelResources* cur = nullptr;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, serialized)) {
      serialized_why[m[2]] = m[1];
    } else if (std::regex_search(line, m, entry)) {
      out.push_back({});
      cur = &out.back();
      cur->function = m[1];
      cur->arch = m[2];
      fill_launch_shape(*cur);
    } else if (cur != nullptr && std::regex_search(line, m, frame)) {
      cur->stack_bytes = std::stol(m[1]);
      cur->spill_store_bytes = std::stol(m[2]);
      cur->spill_load_bytes = std::stol(m[3]);
    } else if (cur != nullptr && std::regex_search(line, m, used)) {
      cur->registers = std::stoi(m[1]);
      if (std::regex_search(line, m, smem)) cur->static_smem_bytes = std::stol(m[1]);
      cur = nullptr;  // "Used" closes an entry
    }
  }
  for (auto& k : out)
    if (const auto it = serialized_why.find(k.function); it != serialized_why.end()) k.wgmma_serialized = it->second;
  return out;
}

std::vector<KernelResources> load_ptxas_logs(const std::string& dir, const std::vector<std::string>* objects) {
  namespace fs = std::filesystem;
  std::vector<KernelResources> all;
  if (!fs::is_directory(dir)) return all;
  const auto canonical = [](const std::string& path) {
    std::error_code ec;
    const fs::path p = fs::weakly_canonical(path, ec);
    return ec ? fs::path(path).lexically_normal().string() : p.string();
  };
  std::set<std::string> current;
  if (objects != nullptr)
    for (const auto& o : *objects) current.insert(canonical(o));
  static const std::string kHeader = "# evosdpa-ptxas-log object=";
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() < 10 || name.substr(name.size() - 10) != ".ptxas.log") continue;
    std::ifstream f(e.path());
    std::string first;
    std::getline(f, first);
    // The object this log belongs to; a log without one predates object-named logs and may duplicate one.
    const std::string object = first.rfind(kHeader, 0) == 0 ? first.substr(kHeader.size()) : std::string();
    if (object.empty() || !fs::exists(object) || (objects != nullptr && current.count(canonical(object)) == 0)) {
      stale.push_back(e.path());
      continue;
    }
    auto ks = parse_ptxas_log(f);
    all.insert(all.end(), ks.begin(), ks.end());
  }
  for (const auto& p : stale) {
    std::error_code ec;
    fs::remove(p, ec);  // best effort: the log is ignored either way
  }
  std::sort(all.begin(), all.end(), [](const KernelResources& a, const KernelResources& b) {
    return a.function != b.function ? a.function < b.function : a.arch < b.arch;
  });
  return all;
}

std::string demangle(const std::string& mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> s(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && s ? std::string(s.get()) : mangled;
}

namespace {

// CUDA Programming Guide, "Technical Specifications per Compute Capability", and the toolkit's
// cuda_occupancy.h (CUDA 13.0: cudaOccMaxBlocksPerMultiprocessor, the shared-memory carveouts):
// per-block opt-in shared memory (static + dynamic; the SM's maximum less the 1 KiB the system reserves
// per block), shared memory per SM, resident threads per SM, resident blocks per SM, registers per SM.
// sm_101 (CUDA 12.8/12.9) is the arch CUDA 13 renamed sm_110 (Jetson Thor).
const std::map<std::string, ArchLimits>& arch_table() {
  static const std::map<std::string, ArchLimits> table = {
      {"sm_80", {163 * 1024, 164 * 1024, 2048, 32, 65536}},   // A100
      {"sm_86", {99 * 1024, 100 * 1024, 1536, 16, 65536}},    // RTX 30xx, A10, A40
      {"sm_87", {163 * 1024, 164 * 1024, 1536, 16, 65536}},   // Jetson Orin
      {"sm_89", {99 * 1024, 100 * 1024, 1536, 24, 65536}},    // RTX 40xx, L4, L40
      {"sm_90", {227 * 1024, 228 * 1024, 2048, 32, 65536}},   // H100, H200
      {"sm_100", {227 * 1024, 228 * 1024, 2048, 32, 65536}},  // B200, GB200
      {"sm_101", {227 * 1024, 228 * 1024, 1536, 24, 65536}},  // Jetson Thor (CUDA 12.8/12.9 name)
      {"sm_103", {227 * 1024, 228 * 1024, 2048, 32, 65536}},  // B300, GB300
      {"sm_110", {227 * 1024, 228 * 1024, 1536, 24, 65536}},  // Jetson Thor (CUDA 13 name)
      {"sm_120", {99 * 1024, 100 * 1024, 1536, 24, 65536}},   // RTX 50xx, RTX PRO Blackwell
      {"sm_121", {99 * 1024, 100 * 1024, 1536, 24, 65536}},   // DGX Spark (GB10)
  };
  return table;
}

}  // namespace

std::string base_arch(const std::string& arch) {
  if (arch.size() > 3 && (arch.back() == 'a' || arch.back() == 'f') &&
      std::isdigit(static_cast<unsigned char>(arch[arch.size() - 2])))
    return arch.substr(0, arch.size() - 1);
  return arch;
}

const ArchLimits* arch_limits(const std::string& arch) {
  const auto& table = arch_table();
  const auto it = table.find(base_arch(arch));
  return it == table.end() ? nullptr : &it->second;
}

const ArchLimits& conservative_arch_limits() {
  static const ArchLimits lim = [] {
    ArchLimits m = arch_table().begin()->second;
    for (const auto& [name, l] : arch_table()) {
      m.smem_per_block_optin = std::min(m.smem_per_block_optin, l.smem_per_block_optin);
      m.smem_per_sm = std::min(m.smem_per_sm, l.smem_per_sm);
      m.max_threads_per_sm = std::min(m.max_threads_per_sm, l.max_threads_per_sm);
      m.max_blocks_per_sm = std::min(m.max_blocks_per_sm, l.max_blocks_per_sm);
      m.regs_per_sm = std::min(m.regs_per_sm, l.regs_per_sm);
    }
    return m;
  }();
  return lim;
}

const ArchLimits& arch_limits_or_conservative(const std::string& arch) {
  const ArchLimits* lim = arch_limits(arch);
  return lim != nullptr ? *lim : conservative_arch_limits();
}

std::vector<std::string> report_warnings(const std::vector<KernelResources>& kernels) {
  std::set<std::string> unknown;
  for (const auto& k : kernels)
    if (arch_limits(k.arch) == nullptr) unknown.insert(k.arch);
  std::vector<std::string> w;
  const ArchLimits& c = conservative_arch_limits();
  for (const auto& arch : unknown)
    w.push_back("warning: no limits known for " + arch + "; using the most conservative known limits (" +
                std::to_string(c.smem_per_block_optin) + " bytes shared memory per block, " +
                std::to_string(c.smem_per_sm) + " per SM, " + std::to_string(c.max_threads_per_sm) +
                " threads and " + std::to_string(c.max_blocks_per_sm) + " blocks per SM, " +
                std::to_string(c.regs_per_sm) + " registers per SM); add it to arch_table() in "
                "src/host/ptxas_report.cpp");
  return w;
}

int occupancy_blocks(const KernelResources& k, const ArchLimits& lim) {
  if (k.threads_per_block <= 0) return 0;
  const int warps = (k.threads_per_block + 31) / 32;
  // Registers are allocated per warp in units of 256.
  const int regs_per_warp = ((std::max(k.registers, 1) * 32 + 255) / 256) * 256;
  int blocks = lim.max_blocks_per_sm;
  blocks = std::min(blocks, lim.max_threads_per_sm / (warps * 32));
  blocks = std::min(blocks, lim.regs_per_sm / (regs_per_warp * warps));
  // Each block also reserves 1 KiB of shared memory for the system.
  const long smem = k.static_smem_bytes + k.dynamic_smem_bytes + 1024;
  blocks = std::min<long>(blocks, lim.smem_per_sm / smem);
  return std::max(blocks, 0);
}

std::vector<std::string> gate_violations(const std::vector<KernelResources>& kernels) {
  std::vector<std::string> v;
  for (const auto& k : kernels) {
    const std::string who = demangle(k.function) + " [" + k.arch + "]: ";
    if (k.spill_store_bytes != 0 || k.spill_load_bytes != 0)
      v.push_back(who + std::to_string(k.spill_store_bytes) + " bytes spill stores, " +
                  std::to_string(k.spill_load_bytes) + " bytes spill loads");
    if (k.stack_bytes != 0) v.push_back(who + std::to_string(k.stack_bytes) + " bytes stack frame");
    if (!k.wgmma_serialized.empty()) v.push_back(who + "wgmma instructions serialized " + k.wgmma_serialized);
    const ArchLimits& lim = arch_limits_or_conservative(k.arch);
    if (k.static_smem_bytes + k.dynamic_smem_bytes > lim.smem_per_block_optin) {
      v.push_back(who + std::to_string(k.static_smem_bytes + k.dynamic_smem_bytes) +
                  " bytes of shared memory per block exceed the limit of " + std::to_string(lim.smem_per_block_optin) +
                  (arch_limits(k.arch) == nullptr ? " (conservative limit: arch not in the table)" : ""));
    }
  }
  return v;
}

std::string report_table(const std::vector<KernelResources>& kernels) {
  std::ostringstream s;
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-58s %-8s %4s %7s %6s %6s %6s %7s %7s %5s\n", "kernel", "arch", "regs", "threads",
                "stack", "spillS", "spillL", "smem_st", "smem_dy", "occ");
  s << buf;
  for (const auto& k : kernels) {
    std::string name = demangle(k.function);
    name = std::regex_replace(name, std::regex(R"(\(evosdpa::detail::KernelParams\)|evosdpa::detail::|void )"), "");
    // '*': an arch not in the table, reported against the conservative limits (see the warnings below).
    const std::string arch = k.arch + (arch_limits(k.arch) == nullptr ? "*" : "");
    std::snprintf(buf, sizeof buf, "%-58s %-8s %4d %7d %6ld %6ld %6ld %7ld %7ld %5d\n", name.substr(0, 58).c_str(),
                  arch.c_str(), k.registers, k.threads_per_block, k.stack_bytes, k.spill_store_bytes,
                  k.spill_load_bytes, k.static_smem_bytes, k.dynamic_smem_bytes,
                  occupancy_blocks(k, arch_limits_or_conservative(k.arch)));
    s << buf;
  }
  s << "occ: resident blocks per SM (theoretical), from registers, shared memory, threads and the block limit\n";
  for (const auto& w : report_warnings(kernels)) s << w << "\n";
  return s.str();
}

std::string report_json(const std::vector<KernelResources>& kernels) {
  std::ostringstream s;
  s << "[\n";
  for (size_t i = 0; i < kernels.size(); ++i) {
    const auto& k = kernels[i];
    const ArchLimits& lim = arch_limits_or_conservative(k.arch);
    const int blocks = occupancy_blocks(k, lim);
    const double occ = static_cast<double>(blocks * k.threads_per_block) / lim.max_threads_per_sm;
    s << "  {\"function\": \"" << k.function << "\", \"name\": \"" << demangle(k.function) << "\", \"arch\": \""
      << k.arch << "\", \"registers\": " << k.registers << ", \"threads_per_block\": " << k.threads_per_block
      << ", \"stack_bytes\": " << k.stack_bytes << ", \"spill_store_bytes\": " << k.spill_store_bytes
      << ", \"spill_load_bytes\": " << k.spill_load_bytes << ", \"static_smem_bytes\": " << k.static_smem_bytes
      << ", \"dynamic_smem_bytes\": " << k.dynamic_smem_bytes << ", \"blocks_per_sm\": " << blocks
      << ", \"occupancy\": " << occ << ", \"arch_limits_known\": " << (arch_limits(k.arch) ? "true" : "false") << "}" << (i + 1 < kernels.size() ? "," : "") << "\n";
  }
  s << "]\n";
  return s.str();
}

}  // namespace evosdpa::host
