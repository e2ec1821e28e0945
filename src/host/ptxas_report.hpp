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
  // ptxas's reason when it serialised the kernel's wgmma instructions (its "Potential Performance Loss:
  // wgmma.mma_async instructions are serialized due to ..." notes, C7510/C7511); empty when it did not.
  std::string wgmma_serialized;
  // Launch shape, from the kernel family's tile table (0 when the kernel is not one of ours).
  int threads_per_block = 0;
  long dynamic_smem_bytes = 0;
};

std::vector<KernelResources> parse_ptxas_log(std::istream& in);

// Every *.ptxas.log in `dir` (written by cmake/ptxas-capture.sh), sorted by function then arch. A log
// names its object file in its first line; a log is skipped and deleted when that object no longer
// exists, when it has no such line (a log from before objects were named), or, when `objects` is given
// (the library's objects now), when its object is not among them. So a source file removed or renamed
// since its log was written leaves nothing behind in the report.
std::vector<KernelResources> load_ptxas_logs(const std::string& dir, const std::vector<std::string>* objects = nullptr);

std::string demangle(const std::string& mangled);

struct ArchLimits {
  long smem_per_block_optin;  // bytes a block may use, static + dynamic
  long smem_per_sm;
  int max_threads_per_sm;
  int max_blocks_per_sm;
  int regs_per_sm;
};
// The arch a ptxas target runs on: "sm_90a" -> "sm_90", "sm_100f" -> "sm_100" (arch-specific `a` and
// family `f` targets share their base arch's limits).
std::string base_arch(const std::string& arch);
// nullptr for an arch not in the table (after base_arch).
const ArchLimits* arch_limits(const std::string& arch);
// The most conservative limits of the table: the smallest value of each field over all known archs.
const ArchLimits& conservative_arch_limits();
// arch_limits(arch), or conservative_arch_limits() for an arch not in the table.
const ArchLimits& arch_limits_or_conservative(const std::string& arch);
// One line per arch of `kernels` not in the table, saying the conservative limits were used for it.
std::vector<std::string> report_warnings(const std::vector<KernelResources>& kernels);

// Resident blocks per SM from registers, shared memory, threads and the block limit (0 if it cannot run).
int occupancy_blocks(const KernelResources& k, const ArchLimits& lim);

// Problems the gate refuses: spills, a stack frame, shared memory beyond the arch's per-block limit (the
// conservative limit for an arch not in the table: see report_warnings), or wgmma instructions ptxas
// serialised (every wgmma of the kernel waits for the one before: 15-50% slower, docs/perf-log.md v13.6).
std::vector<std::string> gate_violations(const std::vector<KernelResources>& kernels);

// The table ends with the lines of report_warnings, if any.
std::string report_table(const std::vector<KernelResources>& kernels);
std::string report_json(const std::vector<KernelResources>& kernels);

}  // namespace evosdpa::host
