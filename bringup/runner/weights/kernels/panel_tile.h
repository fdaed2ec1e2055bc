// The panel product shared by panel_linear.cpp and decode_layers.cpp: y[m, n] (+)= x[m, k] @ W^T + b for a few
// rows, W stored as panels of 16 output columns, float32 ([k][16] each, contiguous) or bfloat16 (panel_bf16.h).
//
// One pass over a panel streams 16 weights per input element and feeds up to MAX_ROWS rows from registers; the
// panel is prefetched 2 KiB ahead, non-temporally (read once per step: it should not evict what the rest of the
// step uses). bfloat16 weights, bias and outputs are accumulated in float32 and the result rounded to nearest-even
// once, as torch's bfloat16 linear does.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "layout_constants.h"  // PANEL

typedef float vec8 __attribute__((vector_size(32)));
typedef uint32_t word8 __attribute__((vector_size(32)));
typedef int32_t mask8 __attribute__((vector_size(32)));
typedef uint16_t bf16;
#ifdef __AVX512F__
static const int MAX_ROWS = 12;  // 24 accumulators + 2 weight vectors of the 32 vector registers
#else
static const int MAX_ROWS = 6;  // 12 + 2 of 16
#endif
static const int64_t PREFETCH_BYTES = 2048;  // a hint, harmless past the end

// One float32 panel row (16 columns) as two vectors, columns 0-7 and 8-15. A tile loads its weights, bias and
// output rows, and stores them, in the same arrangement.
static inline void load16(const float* p, vec8& lo, vec8& hi) {
  std::memcpy(&lo, p, sizeof lo);
  std::memcpy(&hi, p + 8, sizeof hi);
}

// float32 input rows: x(r, i) is row r's element i
struct FloatRows {
  const float* x;
  int64_t ld;
  FloatRows at(int64_t r) const { return {x + r * ld, ld}; }
  float operator()(int r, int64_t i) const { return x[r * ld + i]; }
};

static inline FloatRows input_rows(const float* x, int64_t, int64_t ldx, int64_t, const float*) { return {x, ldx}; }

static inline float scalar(float v) { return v; }

static inline float scalar(bf16 v) {
  const uint32_t w = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &w, sizeof f);
  return f;
}

// x rounded to the nearest bfloat16 (ties to even; NaN stays a quiet NaN), returned widened: what a bfloat16
// op's result is
static inline float round_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits = x != x ? 0x7FC00000u : (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

// what a T op's result is: the float32 value itself, or it rounded to bfloat16
template <typename T>
static inline float as(float x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else return round_bf16(x);
}

static inline void put(float* p, float v) { *p = v; }

static inline void put(bf16* p, float v) {
  const float r = round_bf16(v);
  uint32_t bits;
  std::memcpy(&bits, &r, sizeof bits);
  *p = bf16(bits >> 16);
}

static inline void store16(float* p, vec8 lo, vec8 hi) {
  std::memcpy(p, &lo, sizeof lo);
  std::memcpy(p + 8, &hi, sizeof hi);
}

// ACCUMULATE: y = y + (x W^T + b), the residual add of a decoder layer, in that order of operations
template <int ROWS, bool ACCUMULATE>
static inline void tile(FloatRows x, const float* panel, int64_t k, float* y, int64_t ldy, const float* bias) {
  const int64_t ahead = PREFETCH_BYTES / int64_t(sizeof(float) * PANEL);
  vec8 acc[ROWS][2];
  for (int r = 0; r < ROWS; ++r) acc[r][0] = acc[r][1] = vec8{};
  for (int64_t i = 0; i < k; ++i) {
    __builtin_prefetch(panel + (i + ahead) * PANEL, 0, 0);
    vec8 w0, w1;
    load16(panel + i * PANEL, w0, w1);
    for (int r = 0; r < ROWS; ++r) {
      const float xv = x(r, i);
      acc[r][0] += xv * w0;
      acc[r][1] += xv * w1;
    }
  }
  vec8 b0 = vec8{}, b1 = vec8{};
  if (bias) {
    load16(bias, b0, b1);
  }
  for (int r = 0; r < ROWS; ++r) {
    vec8 out0 = acc[r][0] + b0, out1 = acc[r][1] + b1;
    if constexpr (ACCUMULATE) {
      vec8 y0, y1;
      load16(y + r * ldy, y0, y1);
      out0 = y0 + out0;
      out1 = y1 + out1;
    }
    store16(y + r * ldy, out0, out1);
  }
}

// GROUP adjacent panels for ROWS (few) rows in one pass: GROUP streams in flight per thread instead of one, which
// is what keeps the memory busy when a step has one or two rows (a single stream per core left a quarter of the
// bandwidth unused). Each column's sum is the same, in the same order, as tile's.
template <int ROWS, int GROUP, bool ACCUMULATE>
static inline void group_tile(FloatRows x, const float* panel, int64_t k, float* y, int64_t ldy, const float* bias) {
  const int64_t stride = k * PANEL;
  vec8 acc[ROWS][GROUP][2];
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < GROUP; ++j) acc[r][j][0] = acc[r][j][1] = vec8{};
  for (int64_t i = 0; i < k; ++i) {
    for (int j = 0; j < GROUP; ++j) {
      vec8 w0, w1;
      load16(panel + j * stride + i * PANEL, w0, w1);
      for (int r = 0; r < ROWS; ++r) {
        const float xv = x(r, i);
        acc[r][j][0] += xv * w0;
        acc[r][j][1] += xv * w1;
      }
    }
  }
  for (int j = 0; j < GROUP; ++j) {
    vec8 b0 = vec8{}, b1 = vec8{};
    if (bias) {
      load16(bias + j * PANEL, b0, b1);
    }
    for (int r = 0; r < ROWS; ++r) {
      float* out = y + r * ldy + j * PANEL;
      vec8 out0 = acc[r][j][0] + b0, out1 = acc[r][j][1] + b1;
      if constexpr (ACCUMULATE) {
        vec8 y0, y1;
        load16(out, y0, y1);
        out0 = y0 + out0;
        out1 = y1 + out1;
      }
      store16(out, out0, out1);
    }
  }
}

#include "panel_bf16.h"  // the bfloat16 tiles, for the loops below
#if defined(__AMX_BF16__) && !defined(BRINGUP_NO_AMX)
#include "panel_amx.h"  // and AMX tiles, for steps of more rows
#endif

// the tile for the last `rows` (< MAX_ROWS) rows
template <int ROWS, bool ACCUMULATE, typename X, typename T>
static inline void remainder(int rows, X x, const T* panel, int64_t k, T* y, int64_t ldy, const T* bias) {
  if constexpr (ROWS > 0) {
    if (rows == ROWS) return tile<ROWS, ACCUMULATE>(x, panel, k, y, ldy, bias);
    remainder<ROWS - 1, ACCUMULATE>(rows, x, panel, k, y, ldy, bias);
  }
}

// work item w of a one- or two-row product: a group of GROUP panels, or one of the panels left over after them
template <int ROWS, int GROUP, bool ACCUMULATE, typename X, typename T>
static inline void few_rows_for(X x, const T* panels, int64_t k, int64_t num_panels, const T* bias, T* y,
                                int64_t ldy) {
  const int64_t groups = num_panels / GROUP, items = groups + num_panels % GROUP;
#pragma omp for schedule(static)
  for (int64_t w = 0; w < items; ++w) {
    const int64_t p = w < groups ? w * GROUP : groups * GROUP + (w - groups);
    const T* b = bias ? bias + p * PANEL : nullptr;
    if (w < groups)
      group_tile<ROWS, GROUP, ACCUMULATE>(x, panels + p * k * PANEL, k, y + p * PANEL, ldy, b);
    else
      tile<ROWS, ACCUMULATE>(x, panels + p * k * PANEL, k, y + p * PANEL, ldy, b);
  }
}

// The panels shared among the threads of the enclosing OpenMP parallel region (an orphaned `omp for`, with its
// barrier at the end); called outside one, the calling thread does them all. n must be a multiple of PANEL; x
// rows (float32) have stride ldx, y rows ldy; bias may be null.
template <bool ACCUMULATE, typename T>
static inline void panel_rows_for(const float* x, int64_t m, int64_t ldx, const T* panels, int64_t k, int64_t n,
                                  const T* bias, T* y, int64_t ldy) {
#if defined(__AMX_BF16__) && !defined(BRINGUP_NO_AMX)
  if constexpr (std::is_same_v<T, bf16>) {
    if (amx_serves(m, k)) {
      bf16* rounded = shared_rows(x, m, ldx, k);
      amx_rows_for<ACCUMULATE>(rounded, m, k, panels, k, n, bias, y, ldy);
      return release_rows(rounded);
    }
  }
#endif
  const int64_t num_panels = n / PANEL;
  const auto rows = input_rows(x, m, ldx, k, panels);  // the rows as this thread's tiles read them
  constexpr int wide = sizeof(float) / sizeof(T);  // bfloat16 panels: twice the panels for the same bytes in flight
  if (m == 1) return few_rows_for<1, 4 * wide, ACCUMULATE>(rows, panels, k, num_panels, bias, y, ldy);
  if (m == 2) return few_rows_for<2, 2 * wide, ACCUMULATE>(rows, panels, k, num_panels, bias, y, ldy);
#pragma omp for schedule(static)
  for (int64_t p = 0; p < num_panels; ++p) {
    const T* panel = panels + p * k * PANEL;
    const T* b = bias ? bias + p * PANEL : nullptr;
    T* out = y + p * PANEL;
    int64_t r = 0;
    for (; r + MAX_ROWS <= m; r += MAX_ROWS) tile<MAX_ROWS, ACCUMULATE>(rows.at(r), panel, k, out + r * ldy, ldy, b);
    if (r < m) remainder<MAX_ROWS - 1, ACCUMULATE>(int(m - r), rows.at(r), panel, k, out + r * ldy, ldy, b);
  }
}
