// What the kernel sources take from the C and C++ standard libraries (fixed-width integers, INFINITY),
// from the toolkit's libcu++ when NVRTC compiles them: evosdpa-tune builds its candidates at run time
// from these same sources (tune/candidate.hpp), and NVRTC has no standard library of its own.
#pragma once

#ifdef __CUDACC_RTC__
#include <cuda/std/cstddef>
#include <cuda/std/cstdint>
using cuda::std::int32_t;
using cuda::std::int64_t;
using cuda::std::size_t;
using cuda::std::uint16_t;
using cuda::std::uint32_t;
using cuda::std::uint64_t;
using cuda::std::uint8_t;
using cuda::std::uintptr_t;
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#else
#include <cmath>
#include <cstddef>
#include <cstdint>
#endif
