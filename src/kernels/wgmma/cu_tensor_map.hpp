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
