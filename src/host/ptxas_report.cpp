#include "host/ptxas_report.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>

#include "kernels/mma/mma_config.hpp"

namespace evosdpa::host {
namespace {

// Threads and dynamic shared memory of our kernels, recovered from the mangled name.
void fill_launch_shape(KernelResources& k) {
  if (k.function.find("mma_sm80") != std::string::npos && k.function.find("attention_kernel") != std::string::npos) {
    std::smatch m;
    // attention_kernel<T, row>: the second template argument is the tile-table row.
    if (std::regex_search(k.function, m, std::regex("Li([0-9]+)E"))) {
      const int row = std::stoi(m[1]);
      if (row >= 0 && row < detail::mma_sm80::kConfigCount) {
        k.threads_per_block = detail::mma_sm80::kConfigs[row].threads();
        k.dynamic_smem_bytes = detail::mma_sm80::kConfigs[row].smem_bytes();
      }
    }
  } else if (k.function.find("reference_kernel") != std::string::npos) {
    k.threads_per_block = 128;
  }
}

}  // namespace

std::vector<KernelResources> parse_ptxas_log(std::istream& in) {
  static const std::regex entry(R"(Compiling entry function '([^']+)' for '(sm_[0-9a-z]+)')");
  static const std::regex frame(R"(([0-9]+) bytes stack frame, ([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads)");
  static const std::regex used(R"(Used ([0-9]+) registers)");
  static const std::regex smem(R"(([0-9]+) bytes smem)");
  std::vector<KernelResources> out;
  std::string line;
  KernelResources* cur = nullptr;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, entry)) {
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
  return out;
}

std::vector<KernelResources> load_ptxas_logs(const std::string& dir) {
  std::vector<KernelResources> all;
  if (!std::filesystem::is_directory(dir)) return all;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() < 10 || name.substr(name.size() - 10) != ".ptxas.log") continue;
    std::ifstream f(e.path());
    auto ks = parse_ptxas_log(f);
    all.insert(all.end(), ks.begin(), ks.end());
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

const ArchLimits* arch_limits(const std::string& arch) {
  // CUDA C Programming Guide, "Technical Specifications per Compute Capability".
  static const std::map<std::string, ArchLimits> table = {
      {"sm_80", {163 * 1024, 164 * 1024, 2048, 32, 65536}},
      {"sm_86", {99 * 1024, 100 * 1024, 1536, 16, 65536}},
      {"sm_89", {99 * 1024, 100 * 1024, 1536, 24, 65536}},
      {"sm_90", {227 * 1024, 228 * 1024, 2048, 32, 65536}},
  };
  const auto it = table.find(arch);
  return it == table.end() ? nullptr : &it->second;
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
    const ArchLimits* lim = arch_limits(k.arch);
    if (lim == nullptr) {
      v.push_back(who + "no limits known for this arch");
    } else if (k.static_smem_bytes + k.dynamic_smem_bytes > lim->smem_per_block_optin) {
      v.push_back(who + std::to_string(k.static_smem_bytes + k.dynamic_smem_bytes) +
                  " bytes of shared memory per block exceed the limit of " + std::to_string(lim->smem_per_block_optin));
    }
  }
  return v;
}

std::string report_table(const std::vector<KernelResources>& kernels) {
  std::ostringstream s;
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-58s %-6s %4s %7s %6s %6s %6s %7s %7s %5s\n", "kernel", "arch", "regs", "threads",
                "stack", "spillS", "spillL", "smem_st", "smem_dy", "occ");
  s << buf;
  for (const auto& k : kernels) {
    const ArchLimits* lim = arch_limits(k.arch);
    std::string name = demangle(k.function);
    name = std::regex_replace(name, std::regex(R"(\(evosdpa::detail::KernelParams\)|evosdpa::detail::|void )"), "");
    std::snprintf(buf, sizeof buf, "%-58s %-6s %4d %7d %6ld %6ld %6ld %7ld %7ld %5d\n", name.substr(0, 58).c_str(),
                  k.arch.c_str(), k.registers, k.threads_per_block, k.stack_bytes, k.spill_store_bytes,
                  k.spill_load_bytes, k.static_smem_bytes, k.dynamic_smem_bytes, lim ? occupancy_blocks(k, *lim) : 0);
    s << buf;
  }
  s << "occ: resident blocks per SM (theoretical), from registers, shared memory, threads and the block limit\n";
  return s.str();
}

std::string report_json(const std::vector<KernelResources>& kernels) {
  std::ostringstream s;
  s << "[\n";
  for (size_t i = 0; i < kernels.size(); ++i) {
    const auto& k = kernels[i];
    const ArchLimits* lim = arch_limits(k.arch);
    const int blocks = lim ? occupancy_blocks(k, *lim) : 0;
    const double occ = lim ? static_cast<double>(blocks * k.threads_per_block) / lim->max_threads_per_sm : 0.0;
    s << "  {\"function\": \"" << k.function << "\", \"name\": \"" << demangle(k.function) << "\", \"arch\": \""
      << k.arch << "\", \"registers\": " << k.registers << ", \"threads_per_block\": " << k.threads_per_block
      << ", \"stack_bytes\": " << k.stack_bytes << ", \"spill_store_bytes\": " << k.spill_store_bytes
      << ", \"spill_load_bytes\": " << k.spill_load_bytes << ", \"static_smem_bytes\": " << k.static_smem_bytes
      << ", \"dynamic_smem_bytes\": " << k.dynamic_smem_bytes << ", \"blocks_per_sm\": " << blocks
      << ", \"occupancy\": " << occ << "}" << (i + 1 < kernels.size() ? "," : "") << "\n";
  }
  s << "]\n";
  return s.str();
}

}  // namespace evosdpa::host
