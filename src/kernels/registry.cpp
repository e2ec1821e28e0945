#include "kernels/registry.hpp"

#include <iterator>

namespace evosdpa::detail {

// Each family defines its KernelFamily in its own folder. Adding a family: declare it here and put it
// in kFamilies at its place in speed order.
extern const KernelFamily kMmaSm80Family;    // kernels/mma/mma_family.cpp
extern const KernelFamily kMmaFp8Family;     // kernels/mma_fp8/mma_fp8_family.cpp
extern const KernelFamily kReferenceFamily;  // kernels/reference/reference.cu
extern const KernelFamily kSplitKvSm80Family;  // kernels/splitkv/splitkv_family.cpp
extern const KernelFamily kWgmmaSm90Family;  // kernels/wgmma/wgmma_family.cpp

namespace {

// splitkv_sm80 first for what it is made for (auto_prefers): decoding shapes and KV caches, which the
// others refuse. Then wgmma_sm90: on an H100 it ran 1.2-1.7x mma_sm80's speed at L=4096 (docs/perf-log.md, v8); it
// leaves D=64 grids of less than one wave whose keys it does not split to mma_sm80's small-grid variant
// (auto_prefers).
// mma_fp8_sm89 (FP8 inputs only) before the reference, which is the only other family that takes them.
const KernelFamily* const kFamilies[] = {&kSplitKvSm80Family, &kWgmmaSm90Family, &kMmaSm80Family, &kMmaFp8Family, &kReferenceFamily};

}  // namespace

FamilyTable registry() { return {kFamilies, std::size(kFamilies)}; }

int kernel_count() { return static_cast<int>(std::size(kFamilies)); }

const char* kernel_name(int index) {
  return index >= 0 && index < kernel_count() ? kFamilies[index]->name : nullptr;
}

const KernelFamily* find_family(std::string_view name, FamilyTable table) {
  for (const KernelFamily* f : table)
    if (name == f->name) return f;
  return nullptr;
}

}  // namespace evosdpa::detail
