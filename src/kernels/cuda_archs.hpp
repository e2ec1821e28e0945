// Whether a build's CUDA targets can run on a device: CUDA's compatibility rules applied to a CMake
// CUDA_ARCHITECTURES list, so that selection refuses a device the build has no code for instead of
// letting the launch fail with "no kernel image". Pure: needs no GPU.
#pragma once

#include <string>
#include <string_view>

namespace evosdpa::detail {

enum class ArchMatch {
  kRuns,     // some entry's SASS or PTX runs on the device
  kNoCode,   // no entry does
  kUnknown,  // the list names no targets ("native", "all", "all-major", "OFF", empty, unparseable)
};

// `archs`: CMake CUDA_ARCHITECTURES entries separated by ',' or ';' (or blanks), each XY[a|f][-real|-virtual]
// ("80,89,90", "90a", "80-real;90-virtual", "100f"). XY without a suffix gives SASS sm_XY and PTX
// compute_XY; -real only the SASS, -virtual only the PTX. On a device of compute capability M.m:
// - SASS sm_XY and family-specific sm_XYf run when M == X and m >= Y (binary compatibility within a major
//   version, upwards); arch-specific sm_XYa runs only when M.m == X.Y;
// - PTX compute_XY is JIT-compiled for any M.m >= X.Y; compute_XYf only within its family (M == X, m >= Y);
//   compute_XYa only for M.m == X.Y.
ArchMatch cuda_archs_run_on(std::string_view archs, int cc_major, int cc_minor);

// The compute capability (10 major + minor) that the code a device runs was compiled for, which bounds
// what its kernels saw as __CUDA_ARCH__ / 10: the highest entry whose SASS runs there, else the highest
// whose PTX does (the driver takes compatible SASS before JIT-compiling PTX). -1 when the list names no
// targets or none runs.
int cuda_archs_code_level(std::string_view archs, int cc_major, int cc_minor);

// The list for messages: "sm_80, sm_90a", "sm_80 SASS, compute_90 PTX"; for a list that names no targets,
// "CMAKE_CUDA_ARCHITECTURES=<list>".
std::string describe_cuda_archs(std::string_view archs);

}  // namespace evosdpa::detail
