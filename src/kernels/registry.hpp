// The table of kernel families: the kernel names of the C ABI, their order and their lookup come from it.
#pragma once

#include <string_view>

#include "kernels/family.hpp"

namespace evosdpa::detail {

// Every family of this build, fastest first.
FamilyTable registry();

// Names of the registry's families, index 0 .. kernel_count()-1; nullptr for an index out of range.
int kernel_count();
const char* kernel_name(int index);

// The family called `name` in `table`; nullptr if none ("auto" is not a family name).
const KernelFamily* find_family(std::string_view name, FamilyTable table = registry());

}  // namespace evosdpa::detail
