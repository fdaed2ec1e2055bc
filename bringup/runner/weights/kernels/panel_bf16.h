// The bfloat16 panel tiles, included by panel_tile.h (which defines PANEL, MAX_ROWS, the vector types and the
// rounding helpers used here, and the loops over panels that call these tiles).
//
// A bfloat16 panel stores its 16 columns pairs-along-k: for each pair of inputs (2i, 2i+1) one 64-byte row of 16
// words, word c holding column c's weight for input 2i in its low half and for 2i+1 in its high half; for an odd
// k the last input's 16 weights follow as one 32-byte row. Bias and outputs are 16 columns in order.
//
// With AVX512-BF16 (the library is built -march=native) one vdpbf16ps multiplies such a row by a broadcast pair of
// inputs, rounded to bfloat16 first, and adds both products (exact in float32) to 16 float32 sums: two k-steps of
// 16 columns in one instruction, where widening takes a mask, a shift and two FMAs per 8 columns and k-step. The
// instruction treats bfloat16 subnormals as zero and flushes subnormal sums, and adds a pair's two products in one
// step; the sums are otherwise what the widening path computes. Without it, each row is widened (exact) and
// multiplied in float32 by the float32 inputs, in k order, as before. Either way each column's sum is rounded to
// bfloat16 once, after the bias (and the residual, when accumulating).
#pragma once
#ifdef __AVX512BF16__
#include <immintrin.h>

#include <vector>
#endif

typedef uint16_t half8 __attribute__((vector_size(16)));

// 16 bfloat16 values in order, widened: columns 0-7 and 8-15
static inline void load16(const bf16* p, vec8& lo, vec8& hi) {
  half8 a, b;
  std::memcpy(&a, p, sizeof a);
  std::memcpy(&b, p + 8, sizeof b);
  const word8 wa = __builtin_convertvector(a, word8) << 16, wb = __builtin_convertvector(b, word8) << 16;
  std::memcpy(&lo, &wa, sizeof lo);
  std::memcpy(&hi, &wb, sizeof hi);
}

static inline word8 rounded_bits(vec8 v) {  // round to nearest even, the result in the top 16 bits; NaN stays quiet
  word8 bits;
  std::memcpy(&bits, &v, sizeof bits);
  const word8 rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
  const mask8 nan = v != v;
  return nan ? word8{} + 0x7FC00000u : rounded;
}

static inline void store16(bf16* p, vec8 lo, vec8 hi) {
  const half8 a = __builtin_convertvector(rounded_bits(lo) >> 16, half8);
  const half8 b = __builtin_convertvector(rounded_bits(hi) >> 16, half8);
  std::memcpy(p, &a, sizeof a);
  std::memcpy(p + 8, &b, sizeof b);
}

// out = sum + bias (+ out, when ACCUMULATE), rounded once
template <bool ACCUMULATE>
static inline void finish16(vec8 lo, vec8 hi, const bf16* bias, bf16* out) {
  if (bias) {
    vec8 b0, b1;
    load16(bias, b0, b1);
    lo += b0;
    hi += b1;
  }
  if constexpr (ACCUMULATE) {
    vec8 y0, y1;
    load16(out, y0, y1);
    lo = y0 + lo;
    hi = y1 + hi;
  }
  store16(out, lo, hi);
}

#ifdef __AVX512BF16__
// The input rows as the instruction reads them: each pair of inputs rounded to bfloat16 and packed in one word
// (the last of an odd k with a zero), this thread's copy made once per product
struct InputRows {
  const uint32_t* pairs;
  int64_t ld;
  InputRows at(int64_t r) const { return {pairs + r * ld, ld}; }
};

static inline InputRows input_rows(const float* x, int64_t m, int64_t ldx, int64_t k, const bf16*) {
  static thread_local std::vector<uint32_t> buffer;
  const int64_t ld = (k + 1) / 2;
  buffer.assign(size_t(m * ld), 0u);
  for (int64_t r = 0; r < m; ++r) {
    bf16* row = reinterpret_cast<bf16*>(buffer.data() + r * ld);
    for (int64_t i = 0; i < k; ++i) put(row + i, x[r * ldx + i]);
  }
  return {buffer.data(), ld};
}

struct Sum16 {
  __m512 v = _mm512_setzero_ps();
};

struct InputPair {
  __m512bh v;
};

static inline InputPair pair_at(InputRows x, int r, int64_t i) {
  return {(__m512bh)_mm512_set1_epi32(int(x.pairs[r * x.ld + i]))};
}

static inline void add_pair(Sum16& sum, InputPair x, const bf16* w) {
  sum.v = _mm512_dpbf16_ps(sum.v, x.v, (__m512bh)_mm512_loadu_si512(w));
}

static inline void add_last(Sum16& sum, InputRows x, int r, int64_t k, const bf16* w) {
  vec8 lo, hi;
  load16(w, lo, hi);
  const float xv = scalar(bf16(x.pairs[r * x.ld + k / 2]));
  sum.v = _mm512_fmadd_ps(_mm512_set1_ps(xv), _mm512_insertf32x8(_mm512_castps256_ps512(__m256(lo)), __m256(hi), 1),
                          sum.v);
}

static inline void halves(const Sum16& sum, vec8& lo, vec8& hi) {
  lo = vec8(_mm512_castps512_ps256(sum.v));
  hi = vec8(_mm512_extractf32x8_ps(sum.v, 1));
}
#else
static inline FloatRows input_rows(const float* x, int64_t, int64_t ldx, int64_t, const bf16*) { return {x, ldx}; }

struct Sum16 {
  vec8 lo = vec8{}, hi = vec8{};
};

struct InputPair {
  float first, second;
};

static inline InputPair pair_at(FloatRows x, int r, int64_t i) { return {x(r, 2 * i), x(r, 2 * i + 1)}; }

static inline void add_pair(Sum16& sum, InputPair x, const bf16* w) {
  word8 a, b;  // columns 0-7 and 8-15, each word the pair's two weights
  std::memcpy(&a, w, sizeof a);
  std::memcpy(&b, w + PANEL, sizeof b);
  const word8 a0 = a << 16, a1 = a & 0xFFFF0000u, b0 = b << 16, b1 = b & 0xFFFF0000u;
  vec8 wa0, wa1, wb0, wb1;
  std::memcpy(&wa0, &a0, sizeof wa0);
  std::memcpy(&wa1, &a1, sizeof wa1);
  std::memcpy(&wb0, &b0, sizeof wb0);
  std::memcpy(&wb1, &b1, sizeof wb1);
  sum.lo += x.first * wa0;
  sum.lo += x.second * wa1;
  sum.hi += x.first * wb0;
  sum.hi += x.second * wb1;
}

static inline void add_last(Sum16& sum, FloatRows x, int r, int64_t k, const bf16* w) {
  vec8 lo, hi;
  load16(w, lo, hi);
  sum.lo += x(r, k - 1) * lo;
  sum.hi += x(r, k - 1) * hi;
}

static inline void halves(const Sum16& sum, vec8& lo, vec8& hi) {
  lo = sum.lo;
  hi = sum.hi;
}
#endif

// GROUP adjacent bfloat16 panels for ROWS rows in one pass (see group_tile in panel_tile.h); ROWS rows of x from `x`
template <int ROWS, int GROUP, bool ACCUMULATE, typename X>
static inline void group_tile(X x, const bf16* panel, int64_t k, bf16* y, int64_t ldy, const bf16* bias) {
  const int64_t stride = k * PANEL, pairs = k / 2, ahead = PREFETCH_BYTES / int64_t(sizeof(bf16));
  Sum16 sums[ROWS][GROUP];
  for (int64_t i = 0; i < pairs; ++i) {
    if constexpr (GROUP == 1) __builtin_prefetch(panel + 2 * i * PANEL + ahead, 0, 0);
    InputPair xs[ROWS];
    for (int r = 0; r < ROWS; ++r) xs[r] = pair_at(x, r, i);
    for (int j = 0; j < GROUP; ++j) {
      const bf16* w = panel + j * stride + 2 * i * PANEL;
      for (int r = 0; r < ROWS; ++r) add_pair(sums[r][j], xs[r], w);
    }
  }
  if (k % 2)
    for (int j = 0; j < GROUP; ++j)
      for (int r = 0; r < ROWS; ++r) add_last(sums[r][j], x, r, k, panel + j * stride + 2 * pairs * PANEL);
  for (int j = 0; j < GROUP; ++j) {
    for (int r = 0; r < ROWS; ++r) {
      vec8 lo, hi;
      halves(sums[r][j], lo, hi);
      finish16<ACCUMULATE>(lo, hi, bias ? bias + j * PANEL : nullptr, y + r * ldy + j * PANEL);
    }
  }
}

template <int ROWS, bool ACCUMULATE, typename X>
static inline void tile(X x, const bf16* panel, int64_t k, bf16* y, int64_t ldy, const bf16* bias) {
  group_tile<ROWS, 1, ACCUMULATE>(x, panel, k, y, ldy, bias);
}
