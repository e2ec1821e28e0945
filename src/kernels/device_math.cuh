// Device helpers both tensor-core families use: shared-memory addresses, packing two floats into one
// register of 16-bit values, stmatrix, and 2^x on the special-function unit.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/rtc_std.hpp"

namespace evosdpa::detail {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ldmatrix.x4's inverse (sm_90+): register k of lane t goes to row t / 4, elements 2 (t % 4) and + 1 of
// 8 x 8 matrix k of 16-bit elements, whose rows' addresses lanes 8k .. 8k + 7 give.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t (&v)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v[0]), "r"(v[1]),
               "r"(v[2]), "r"(v[3])
               : "memory");
#else
  __trap();  // callers test the architecture first
#endif
}

// Two floats rounded to nearest into one register of two 16-bit values (lo in the low half): the layout
// of an mma.sync / wgmma A fragment element pair and of two adjacent output columns.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);

template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// The inverse: the two 16-bit values of a register as floats (exact), lo first.
template <typename T>
__device__ __forceinline__ float2 unpack2(uint32_t bits);

template <>
__device__ __forceinline__ float2 unpack2<__half>(uint32_t bits) {
  return __half22float2(*reinterpret_cast<const __half2*>(&bits));
}

template <>
__device__ __forceinline__ float2 unpack2<__nv_bfloat16>(uint32_t bits) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&bits));
}

// log2(e): the kernels exponentiate with exp2 (scores and lse times this).
inline constexpr float kLog2e = 1.4426950408889634f;

// 2^x on the special-function unit; 2^-inf = 0, which masked scores rely on.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 1/x on the special-function unit (1 ulp; an IEEE division is a dozen instructions with a slow path).
__device__ __forceinline__ float fast_rcp(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// A compile-time index (for_each_index).
template <int V>
struct Index {
  static constexpr int value = V;
};

// f(Index<I>{}) for I = kFirst .. kEnd - 1: a loop whose index is a constant expression in its body.
template <int kFirst, int kEnd, typename F>
__device__ __forceinline__ void for_each_index(F&& f) {
  if constexpr (kFirst < kEnd) {
    f(Index<kFirst>{});
    for_each_index<kFirst + 1, kEnd>(f);
  }
}

}  // namespace evosdpa::detail
