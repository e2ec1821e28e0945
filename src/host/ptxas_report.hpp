// Per-kernel resource usage read from ptxas -v output (captured by cmake/ptxas-capture.sh during the
// build), with the launch shape each kernel uses and the resulting theoretical occupancy.
#pragma once

#include <istream>
#include <string>
#include <vector>

namespace evosdpa::host {

struct KernelResources {
  std::string function;  // mangled name
  std::string arch;      // "sm_80", ...
  int registers = 0;
  long stack_bytes = 0;
  long spill_store_bytes = 0;
  long spill_load_bytes = 0;
  long static_smem_bytes = 0;
  // Launch shape, from the kernel family's tile table (0 when the kernel is not one of ours).
  int threads_per_block = 0;
  long dynamic_smem_bytes = 0;
};

std::vector<KernelResources> parse_ptxas_log(std::istream& in);
// Every *.ptxas.log in `dir`, sorted by function then arch.
std::vector<KernelResources> load_ptxas_logs(const std::string& dir);

std::string demangle(const std::string& mangled);

struct ArchLimits {
  long smem_per_block_optin;  // bytes a block may use, static + dynamic
  long smem_per_sm;
  int max_threads_per_sm;
  int max_blocks_per_sm;
  int regs_per_sm;
};
// nullptr for an arch not in the table.
const ArchLimits* arch_limits(const std::string& arch);

// Resident blocks per SM from registers, shared memory, threads and the block limit (0 if it cannot run).
int occupancy_blocks(const KernelResources& k, const ArchLimits& lim);

// Problems the gate refuses: spills, a stack frame, or shared memory beyond the arch's per-block limit.
std::vector<std::string> gate_violations(const std::vector<KernelResources>& kernels);

std::string report_table(const std::vector<KernelResources>& kernels);
std::string report_json(const std::vector<KernelResources>& kernels);

}  // namespace evosdpa::host
