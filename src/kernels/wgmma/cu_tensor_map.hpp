// CUtensorMap, the TMA descriptor the Hopper kernel takes as a __grid_constant__ parameter: from cuda.h,
// or, when NVRTC compiles the kernel (evosdpa-tune's candidates, tune/candidate.hpp), a type of the same
// size and alignment: cuda.h needs the C library, which NVRTC does not have. The kernel only takes the
// map's address; the host encodes it (tma_map.hpp).
#pragma once

#ifdef __CUDACC_RTC__
typedef struct CUtensorMap_st {
  alignas(64) unsigned long long opaque[16];  // cuda.h: CU_TENSOR_MAP_NUM_QWORDS
} CUtensorMap;
#else
#include <cuda.h>
#endif

namespace evosdpa::detail::wgmma_sm90 {

// A mask tensor's map as the kernel's parameter (wgmma_mask.cuh): only the kernels with a mask tensor
// have one; the others take an empty struct in its place, so that their parameter block stays what it
// was before masks (four maps, the params, the geometry). (Graph replay of (1,8,512,64) measured the same
// with a fifth map in every kernel: 7.90-8.00 us against 7.84-8.03 on an H100, docs/perf-log.md v13.6.)
template <bool kOn>
struct MaskMap {};
template <>
struct MaskMap<true> {
  CUtensorMap map;
};

}  // namespace evosdpa::detail::wgmma_sm90
