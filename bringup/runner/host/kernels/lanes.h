// 16 float32 lanes as one vector type, e^x on them, and their bfloat16 loads and stores: shared by the host kernels
// that compute element-wise in float32 between bfloat16 values (prompt_ops.cpp, flash_prompt.cpp).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "panel_tile.h"  // bf16, scalar, put

// 16 float32 lanes (two AVX2 registers where AVX-512 is absent), their bit patterns, and 16 bfloat16 values
typedef float lanes __attribute__((vector_size(64)));
typedef int32_t int_lanes __attribute__((vector_size(64)));
typedef uint32_t bit_lanes __attribute__((vector_size(64)));
typedef uint16_t bf16_lanes __attribute__((vector_size(32)));

static inline int32_t to_int(float x) { return int32_t(x); }
static inline int_lanes to_int(lanes x) { return __builtin_convertvector(x, int_lanes); }
template <typename F, typename B>
static inline F from_bits(B bits) {
  F out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

// e^x in float32 for every x (lane by lane for `lanes`), within 2 ulp of the exact value where it is normal (Cephes'
// expf: 2^n times a degree-6 polynomial on [-ln2/2, ln2/2]), without branches; +-inf and NaN as expf
template <typename F>
static inline F exp_approx(F x) {
  const F low = x < -104.f ? F{} - 104.f : x;  // F{} + c: the constant in every lane (a float alone for F float)
  const F clamped = low > 88.7228394f ? F{} + 88.7228394f : low;  // NaN goes on, replaced at the end
  const float shifter = 12582912.f;  // 1.5 * 2^23: adding it rounds a float below 2^22 to an integer, ties to even
  const F n = (clamped * 1.44269504088896341f + shifter) - shifter;
  F r = clamped - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  F p = F{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  // 2^n split in two factors, so n from -150 to 128 stays a product of normal scales
  const auto whole = to_int(n);
  const auto half = whole >> 1, rest = whole - half;
  const F y = p * from_bits<F>((half + 127) << 23) * from_bits<F>((rest + 127) << 23);
  const F big = x > 88.72283935546875f ? F{} + INFINITY : y;
  const F both = x < -103.972084045410f ? F{} : big;
  return x != x ? x : both;
}

static inline lanes widen(const bf16* p) {
  bf16_lanes h;
  std::memcpy(&h, p, sizeof h);
  return from_bits<lanes>(__builtin_convertvector(h, bit_lanes) << 16);
}

static inline lanes rounded(lanes v) {  // each lane rounded to bfloat16 (ties to even, NaN a quiet NaN), widened
  const bit_lanes bits = from_bits<bit_lanes>(v);
  const bit_lanes nearest = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
  return from_bits<lanes>(v != v ? bit_lanes{} + 0x7FC00000u : nearest);
}

static inline void narrow(bf16* p, lanes v) {  // v must hold bfloat16 values already (rounded)
  const bf16_lanes h = __builtin_convertvector(from_bits<bit_lanes>(v) >> 16, bf16_lanes);
  std::memcpy(p, &h, sizeof h);
}

// 16 values of T as float32 lanes, and back (rounded to bfloat16 for T bf16); as_lanes: what a T op's results are
static inline lanes load(const float* p) {
  lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
static inline lanes load(const bf16* p) { return widen(p); }
static inline void store(float* p, lanes v) { std::memcpy(p, &v, sizeof v); }
static inline void store(bf16* p, lanes v) { narrow(p, rounded(v)); }
template <typename T>
static inline lanes as_lanes(lanes v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else return rounded(v);
}

