// The quantized product shared by quantized_linear.cpp and decode_layers.cpp: y[m, n] (+)= x[m, k] @ W^T + b for a
// few rows, W stored as runner/weights/formats/integer.py lays it out, x and y float32.
//
// The rows of x are first quantized per block of 32 to int8 codes, a float32 scale and the codes' sum (as the
// reference does), so each block's product is an exact integer dot product. W's rows are stored in tiles of 16,
// interleaved so that one 64-byte load holds the same 4 input features of 16 rows: one `vpdpbusd` (VNNI) multiplies
// them by one broadcast 32-bit word of x's codes and adds each row's 4 products into its own 32-bit lane. A block
// then costs 8 such instructions for 16 rows, with no horizontal sums: the 16 lanes are the 16 outputs. `vpdpbusd`
// multiplies unsigned by signed bytes: int8 codes are stored as q + 128, so the lane starts at -128 * sum(x's
// codes); int4 codes (0..15) are unsigned already and add m * d_x * sum(x's codes) per block (an int4 weight's d and
// m may cover 2 or 4 blocks: groups of 64 or 128). An int4 byte carries twice the products of an int8 one, so its
// 512-bit form shares each broadcast word of x among the tiles of a pass and masks the high nibble in place: the
// int4 kinds streamed 1 GB of weights at 52.5 (int4) and 50.1 GB/s (int4_g64), where they had at 46.8 and 31.7, on a
// quiet 2-core Zen 5 (medians of 6 interleaved rounds; int8 57.6-65.0). Without VNNI, AVX2's
// `vpmaddubsw` + `vpmaddwd` compute the same sums 8 rows at a time (int8 with x's sign moved onto the weight, so
// no product saturates 16 bits); without AVX2, plain C. Each pass streams STREAMS tiles and feeds up to MAX_QROWS
// rows of x from cache; the tiles are split evenly among the threads.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include <omp.h>

#include "layout_constants.h"  // QGROUP, QTILE, QWORD, the scale bytes, the formats

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

static const int MAX_QROWS = 4;
static const int STREAMS = 4;  // tiles per pass

// x's rows as int8 blocks: codes [m][k], scales and sums of codes [m][k / 32]
struct QuantizedRows {
  int8_t* codes;
  float* scales;
  int32_t* sums;
  int64_t k;
};

// a row's bytes per weight group
static constexpr int64_t group_row_bytes(int format) {
  return format == FORMAT_INT8 ? QGROUP + INT8_SCALE_BYTES : 2 * INT4_SCALE_BYTES + weight_group(format) / 2;
}

static inline int64_t row_bytes(int format, int64_t k) { return k / weight_group(format) * group_row_bytes(format); }

static inline int32_t word_at(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

static inline float read_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  const uint32_t sign = uint32_t(h >> 15) << 31, exponent = (h >> 10) & 31, mantissa = h & 1023;
  float magnitude;
  if (exponent == 0) magnitude = std::ldexp(float(mantissa), -24);
  else if (exponent == 31) magnitude = mantissa ? NAN : INFINITY;
  else magnitude = std::ldexp(float(mantissa | 1024), int(exponent) - 25);
  return sign ? -magnitude : magnitude;
}

// Block b of row r of x: d = max|x| / 127, q = round-half-even(x * (1 / d)). A block holding a NaN or an infinity
// gets a NaN scale, so every output it feeds is NaN (as the reference's would be).
static inline void quantize_block(const float* x, int64_t ldx, int64_t r, int64_t b, const QuantizedRows& a) {
  const float* xb = x + r * ldx + b * QGROUP;
#if defined(__AVX512F__)
  // the same arithmetic 16 lanes at a time: the largest magnitude, one multiply, round to nearest even, clamp
  const __m512 lo = _mm512_loadu_ps(xb), hi = _mm512_loadu_ps(xb + 16);
  const __m512 abs_lo = _mm512_abs_ps(lo), abs_hi = _mm512_abs_ps(hi), inf = _mm512_set1_ps(INFINITY);
  const bool all_finite = (_mm512_cmp_ps_mask(abs_lo, inf, _CMP_LT_OQ) & _mm512_cmp_ps_mask(abs_hi, inf, _CMP_LT_OQ))
                          == 0xFFFF;
  const float top = _mm512_reduce_max_ps(_mm512_max_ps(abs_lo, abs_hi));
  const float step = top / 127.f, inverse_step = step > 0.f ? 1.f / step : 0.f;
  const __m512 scale = _mm512_set1_ps(all_finite ? inverse_step : 0.f), limit = _mm512_set1_ps(127.f);
  const int rounding = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m512i q_lo = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_roundscale_ps(
      _mm512_mul_ps(lo, scale), rounding), _mm512_sub_ps(_mm512_setzero_ps(), limit)), limit));
  const __m512i q_hi = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_roundscale_ps(
      _mm512_mul_ps(hi, scale), rounding), _mm512_sub_ps(_mm512_setzero_ps(), limit)), limit));
  int8_t* out = a.codes + r * a.k + b * QGROUP;
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(q_lo));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16), _mm512_cvtepi32_epi8(q_hi));
  const int64_t at = r * (a.k / QGROUP) + b;
  a.scales[at] = all_finite ? step : NAN;
  a.sums[at] = _mm512_reduce_add_epi32(_mm512_add_epi32(q_lo, q_hi));
  if (!all_finite) {  // codes 0, as in plain C (the NaN scale poisons every product either way)
    std::memset(out, 0, QGROUP);
    a.sums[at] = 0;
  }
#else
  float amax = 0.f;
  bool finite = true;
  for (int i = 0; i < QGROUP; ++i) {
    const float v = std::fabs(xb[i]);
    amax = v > amax ? v : amax;
    finite = finite && std::isfinite(xb[i]);
  }
  const float d = amax / 127.f, inverse = d > 0.f ? 1.f / d : 0.f;
  int8_t* codes = a.codes + r * a.k + b * QGROUP;
  int sum = 0;
  for (int i = 0; i < QGROUP; ++i) {
    float q = finite ? std::nearbyint(xb[i] * inverse) : 0.f;
    q = q > 127.f ? 127.f : (q < -127.f ? -127.f : q);
    codes[i] = int8_t(q);
    sum += int(q);
  }
  const int64_t rb = r * (a.k / QGROUP) + b;
  a.scales[rb] = finite ? d : NAN;
  a.sums[rb] = sum;
#endif
}

// every block of every row, shared among the threads of the enclosing parallel region (an orphaned `omp for`)
static inline void quantize_rows_for(const float* x, int64_t m, int64_t ldx, const QuantizedRows& a) {
  const int64_t blocks = a.k / QGROUP;
#pragma omp for schedule(static)
  for (int64_t rb = 0; rb < m * blocks; ++rb) quantize_block(x, ldx, rb / blocks, rb % blocks, a);
}

// every block of every row by the calling thread alone, into its own `a`: no barrier before it reads them
static inline void quantize_rows(const float* x, int64_t m, int64_t ldx, const QuantizedRows& a) {
  for (int64_t r = 0; r < m; ++r)
    for (int64_t b = 0; b < a.k / QGROUP; ++b) quantize_block(x, ldx, r, b, a);
}

// GCC 12 with -march=alderlake (AVX-VNNI) auto-vectorized tile_in_c's int8 sums wrongly for two or more rows of x
// (outputs off by 4.6 times the largest; -fno-tree-vectorize or -mno-avxvnni gave the right ones): plain C stays plain
#if defined(__GNUC__) && !defined(__clang__)
#define SCALAR_LOOPS __attribute__((optimize("no-tree-vectorize")))
#else
#define SCALAR_LOOPS
#endif

// One tile of `height` rows in plain C: out[r][i] = x row r . weight row i of the tile
template <int ROWS>
SCALAR_LOOPS static inline void tile_in_c(int format, const QuantizedRows& a, const uint8_t* tile, int height,
                                          float out[ROWS][QTILE]) {
  const int64_t blocks = a.k / QGROUP, group = weight_group(format), sub = group / QGROUP;
  const int64_t group_bytes = height * group_row_bytes(format);
  for (int r = 0; r < ROWS; ++r)
    for (int i = 0; i < height; ++i) {
      float s = 0.f;
      for (int64_t b = 0; b < blocks; ++b) {
        const uint8_t* weights = tile + b / sub * group_bytes;
        const int8_t* x = a.codes + r * a.k + b * QGROUP;
        const float dx = a.scales[r * blocks + b];
        int dot = 0;
        if (format == FORMAT_INT8) {
          const uint8_t* codes = weights + height * INT8_SCALE_BYTES;
          for (int g = 0; g < QGROUP / QWORD; ++g)
            for (int c = 0; c < QWORD; ++c)
              dot += int(int8_t(codes[(g * height + i) * QWORD + c] ^ 0x80)) * int(x[g * QWORD + c]);
          s += float(dot) * (read_f16(weights + i * INT8_SCALE_BYTES) * dx);
        } else {
          const uint8_t* codes = weights + 2 * height * INT4_SCALE_BYTES + b % sub * height * (QGROUP / 2);
          for (int h = 0; h < QGROUP / 2 / QWORD; ++h)
            for (int c = 0; c < QWORD; ++c) {
              const int byte = codes[(h * height + i) * QWORD + c];
              dot += (byte & 15) * int(x[h * QWORD + c]) + (byte >> 4) * int(x[QGROUP / 2 + h * QWORD + c]);
            }
          const float d = read_f16(weights + i * INT4_SCALE_BYTES);
          const float m = read_f16(weights + (height + i) * INT4_SCALE_BYTES);
          s += float(dot) * (d * dx) + m * (dx * float(a.sums[r * blocks + b]));
        }
      }
      out[r][i] = s;
    }
}

#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512F__)
#define QUANTIZED_512 1
// The int8 form: NT tiles of `height` rows each (16, or fewer in a last tile: masked loads), `stride` bytes apart
template <int ROWS, int NT>
static inline void int8_tiles_512(const QuantizedRows& a, const uint8_t* w, int64_t stride, int height,
                                  float out[ROWS][NT][QTILE]) {
  const int64_t blocks = a.k / QGROUP, group_bytes = height * group_row_bytes(FORMAT_INT8), quad = height * QWORD;
  const __mmask16 lanes = __mmask16((1u << height) - 1);
  const __mmask64 bytes = height == QTILE ? ~__mmask64(0) : (__mmask64(1) << quad) - 1;
  __m512 acc[ROWS][NT];
  for (int r = 0; r < ROWS; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    for (int t = 0; t < NT; ++t) {
      const uint8_t* weights = w + t * stride + b * group_bytes;
      const __m512 dw = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, weights));
      const uint8_t* codes = weights + height * INT8_SCALE_BYTES;
      __m512i even[ROWS], odd[ROWS];
      for (int r = 0; r < ROWS; ++r) {
        even[r] = _mm512_set1_epi32(-128 * a.sums[r * blocks + b]);
        odd[r] = _mm512_setzero_si512();
      }
      for (int g = 0; g < QGROUP / QWORD; g += 2) {
        const __m512i w0 = _mm512_maskz_loadu_epi8(bytes, codes + g * quad);
        const __m512i w1 = _mm512_maskz_loadu_epi8(bytes, codes + (g + 1) * quad);
        for (int r = 0; r < ROWS; ++r) {
          const int8_t* x = a.codes + r * a.k + b * QGROUP;
          even[r] = _mm512_dpbusd_epi32(even[r], w0, _mm512_set1_epi32(word_at(x + g * QWORD)));
          odd[r] = _mm512_dpbusd_epi32(odd[r], w1, _mm512_set1_epi32(word_at(x + (g + 1) * QWORD)));
        }
      }
      for (int r = 0; r < ROWS; ++r) {
        const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(a.scales[r * blocks + b]));
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(even[r], odd[r])), scale, acc[r][t]);
      }
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out[r][t], acc[r][t]);
}

// The int4 form, the tiles innermost: each 32-bit word of x is broadcast once per block and meets every tile, and
// a code byte's high nibble is masked in place (16 times its value, undone by one exact shift of its sums). Each
// row and tile keeps two sums and a total: one row of x takes up to 4 tiles at once, several rows one tile
template <int ROWS, int NT, int FORMAT>
static inline void int4_tiles_512(const QuantizedRows& a, const uint8_t* w, int64_t stride, int height,
                                  float out[ROWS][NT][QTILE]) {
  constexpr int64_t SUB = weight_group(FORMAT) / QGROUP;  // blocks of x per weight group
  const int64_t blocks = a.k / QGROUP, group_bytes = height * group_row_bytes(FORMAT), quad = height * QWORD;
  const __mmask16 lanes = __mmask16((1u << height) - 1);
  const __mmask64 bytes = height == QTILE ? ~__mmask64(0) : (__mmask64(1) << quad) - 1;
  const __m512i low_mask = _mm512_set1_epi8(0x0F), high_mask = _mm512_set1_epi8(char(0xF0));
  __m512 acc[ROWS][NT];
  for (int r = 0; r < ROWS; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t wg = 0; wg < blocks / SUB; ++wg) {
    __m512 dw[NT], mw[NT];
    for (int t = 0; t < NT; ++t) {
      const uint8_t* weights = w + t * stride + wg * group_bytes;
      dw[t] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, weights));
      mw[t] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, weights + height * INT4_SCALE_BYTES));
    }
    for (int64_t s = 0; s < SUB; ++s) {
      const int64_t b = wg * SUB + s;
      const uint8_t* codes = w + wg * group_bytes + 2 * height * INT4_SCALE_BYTES + s * height * (QGROUP / 2);
      __m512i low[ROWS][NT], high[ROWS][NT];
      for (int r = 0; r < ROWS; ++r)
        for (int t = 0; t < NT; ++t) low[r][t] = high[r][t] = _mm512_setzero_si512();
      for (int h = 0; h < QGROUP / 2 / QWORD; ++h) {
        __m512i x_low[ROWS], x_high[ROWS];
        for (int r = 0; r < ROWS; ++r) {
          const int8_t* x = a.codes + r * a.k + b * QGROUP;
          x_low[r] = _mm512_set1_epi32(word_at(x + h * QWORD));
          x_high[r] = _mm512_set1_epi32(word_at(x + QGROUP / 2 + h * QWORD));
        }
        for (int t = 0; t < NT; ++t) {
          const __m512i v = _mm512_maskz_loadu_epi8(bytes, codes + t * stride + h * quad);
          const __m512i v_low = _mm512_and_si512(v, low_mask), v_high = _mm512_and_si512(v, high_mask);
          for (int r = 0; r < ROWS; ++r) {
            low[r][t] = _mm512_dpbusd_epi32(low[r][t], v_low, x_low[r]);
            high[r][t] = _mm512_dpbusd_epi32(high[r][t], v_high, x_high[r]);
          }
        }
      }
      for (int r = 0; r < ROWS; ++r) {
        const float dx = a.scales[r * blocks + b];
        const __m512 dx_v = _mm512_set1_ps(dx), m_term = _mm512_set1_ps(dx * float(a.sums[r * blocks + b]));
        for (int t = 0; t < NT; ++t) {
          const __m512i dot = _mm512_add_epi32(low[r][t], _mm512_srai_epi32(high[r][t], 4));
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw[t], dx_v), acc[r][t]);
          acc[r][t] = _mm512_fmadd_ps(mw[t], m_term, acc[r][t]);
        }
      }
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out[r][t], acc[r][t]);
}
#elif defined(__AVX2__)
#define QUANTIZED_256 1
// int32 lanes += the products of 4 weight bytes and 4 activation codes, 8 rows: weights unsigned, x signed
static inline __m256i dot_words(__m256i sums, __m256i w, __m256i x) {
#if defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(sums, w, x);
#else
  return _mm256_add_epi32(sums, _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1)));
#endif
}

// the int8 form: stored q + 128 times x; without VNNI, |x| times q with x's sign (no 16-bit saturation)
static inline __m256i dot_int8_words(__m256i sums, __m256i stored, __m256i x) {
#if defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(sums, stored, x);
#else
  const __m256i q = _mm256_xor_si256(stored, _mm256_set1_epi8(char(0x80)));
  const __m256i products = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(q, x));
  return _mm256_add_epi32(sums, _mm256_madd_epi16(products, _mm256_set1_epi16(1)));
#endif
}

#if defined(__AVXVNNI__)
static const int INT8_STARTS_AT_OFFSET = 1;  // the lanes start at -128 * sum(x's codes)
#else
static const int INT8_STARTS_AT_OFFSET = 0;
#endif

// one whole tile (16 rows) as two halves of 8 rows
template <int ROWS, int FORMAT>
static inline void tile_256(const QuantizedRows& a, const uint8_t* tile, float out[ROWS][QTILE]) {
  constexpr int64_t SUB = weight_group(FORMAT) / QGROUP;  // blocks of x per weight group
  const int64_t blocks = a.k / QGROUP, group_bytes = QTILE * group_row_bytes(FORMAT), quad = QTILE * QWORD;
  __m256 acc[ROWS][2];
  for (int r = 0; r < ROWS; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* weights = tile + b / SUB * group_bytes;
    for (int half = 0; half < 2; ++half) {
      __m256i sums[ROWS];
      __m256 dw, mw = _mm256_setzero_ps();
      if constexpr (FORMAT == FORMAT_INT8) {
        dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(weights + half * 16)));
        const uint8_t* codes = weights + QTILE * INT8_SCALE_BYTES + half * 32;
        for (int r = 0; r < ROWS; ++r)
          sums[r] = _mm256_set1_epi32(-128 * INT8_STARTS_AT_OFFSET * a.sums[r * blocks + b]);
        for (int g = 0; g < QGROUP / QWORD; ++g) {
          const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + g * quad));
          for (int r = 0; r < ROWS; ++r) {
            const int8_t* x = a.codes + r * a.k + b * QGROUP;
            sums[r] = dot_int8_words(sums[r], wv, _mm256_set1_epi32(word_at(x + g * QWORD)));
          }
        }
      } else {
        dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(weights + half * 16)));
        mw = _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(weights + QTILE * INT4_SCALE_BYTES + half * 16)));
        const uint8_t* codes = weights + 2 * QTILE * INT4_SCALE_BYTES + b % SUB * QTILE * (QGROUP / 2) + half * 32;
        const __m256i mask = _mm256_set1_epi8(15);
        for (int r = 0; r < ROWS; ++r) sums[r] = _mm256_setzero_si256();
        for (int h = 0; h < QGROUP / 2 / QWORD; ++h) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + h * quad));
          const __m256i low = _mm256_and_si256(v, mask), high = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
          for (int r = 0; r < ROWS; ++r) {
            const int8_t* x = a.codes + r * a.k + b * QGROUP;
            sums[r] = dot_words(sums[r], low, _mm256_set1_epi32(word_at(x + h * QWORD)));
            sums[r] = dot_words(sums[r], high, _mm256_set1_epi32(word_at(x + QGROUP / 2 + h * QWORD)));
          }
        }
      }
      for (int r = 0; r < ROWS; ++r) {
        const float dx = a.scales[r * blocks + b];
        acc[r][half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[r]), _mm256_mul_ps(dw, _mm256_set1_ps(dx)), acc[r][half]);
        if constexpr (FORMAT != FORMAT_INT8)
          acc[r][half] = _mm256_fmadd_ps(mw, _mm256_set1_ps(dx * float(a.sums[r * blocks + b])), acc[r][half]);
      }
    }
  }
  for (int r = 0; r < ROWS; ++r) {
    _mm256_storeu_ps(out[r], acc[r][0]);
    _mm256_storeu_ps(out[r] + 8, acc[r][1]);
  }
}
#endif

// NT tiles of `height` rows (NT > 1: whole tiles), `stride` bytes apart: out[r][t][i] = x row r . row i of tile t
template <int ROWS, int NT, int FORMAT>
static inline void quantized_tiles(const QuantizedRows& a, const uint8_t* w, int64_t stride, int height,
                                   float out[ROWS][NT][QTILE]) {
#if defined(QUANTIZED_512)
  if constexpr (FORMAT == FORMAT_INT8) {
    int8_tiles_512<ROWS, NT>(a, w, stride, height, out);
  } else if constexpr (ROWS == 1) {
    int4_tiles_512<ROWS, NT, FORMAT>(a, w, stride, height, out);
  } else {  // a tile at a time: several rows' sums for several tiles would not fit the 32 registers
    for (int t = 0; t < NT; ++t) {
      float one[ROWS][1][QTILE];
      int4_tiles_512<ROWS, 1, FORMAT>(a, w + t * stride, stride, height, one);
      for (int r = 0; r < ROWS; ++r) std::memcpy(out[r][t], one[r][0], sizeof one[r][0]);
    }
  }
#else
  for (int t = 0; t < NT; ++t) {
    float one[ROWS][QTILE];
#if defined(QUANTIZED_256)
    if (height == QTILE) tile_256<ROWS, FORMAT>(a, w + t * stride, one);
    else tile_in_c<ROWS>(FORMAT, a, w + t * stride, height, one);
#else
    tile_in_c<ROWS>(FORMAT, a, w + t * stride, height, one);
#endif
    for (int r = 0; r < ROWS; ++r) std::memcpy(out[r][t], one[r], sizeof one[r]);
  }
#endif
}

template <int ROWS, int NT>
static inline void quantized_int4_tiles(int format, const QuantizedRows& a, const uint8_t* w, int64_t stride,
                                        int height, float out[ROWS][NT][QTILE]) {
  switch (format) {  // one case per int4 format (layout_constants.h's list); the caller passes only those
#define X(code, group) \
  case code:           \
    return quantized_tiles<ROWS, NT, code>(a, w, stride, height, out);
    BRINGUP_INT4_FORMATS
#undef X
    default: return;
  }
}

// rows [r0, r0 + ROWS) of x against NT tiles from tile t0 (of `height` rows each), written (or added) into y
template <int ROWS, int NT, bool ACCUMULATE>
static inline void quantized_pass(int format, const QuantizedRows& a, int64_t r0, const uint8_t* w, int64_t t0,
                                  int height, const float* bias, float* y, int64_t ldy) {
  const int64_t blocks = a.k / QGROUP, stride = QTILE * row_bytes(format, a.k);
  const QuantizedRows rows{a.codes + r0 * a.k, a.scales + r0 * blocks, a.sums + r0 * blocks, a.k};
  const uint8_t* tiles = w + t0 * stride;
  float out[ROWS][NT][QTILE];
  if (format == FORMAT_INT8) quantized_tiles<ROWS, NT, FORMAT_INT8>(rows, tiles, stride, height, out);
  else quantized_int4_tiles<ROWS, NT>(format, rows, tiles, stride, height, out);
  for (int r = 0; r < ROWS; ++r)
    for (int t = 0; t < NT; ++t)
      for (int i = 0; i < height; ++i) {
        const int64_t j = (t0 + t) * QTILE + i;
        float* dst = y + (r0 + r) * ldy + j;
        const float v = out[r][t][i] + (bias ? bias[j] : 0.f);
        *dst = ACCUMULATE ? *dst + v : v;
      }
}

template <int NT, bool ACCUMULATE>
static inline void quantized_rows(int rows, int format, const QuantizedRows& a, int64_t r0, const uint8_t* w,
                                  int64_t t0, int height, const float* bias, float* y, int64_t ldy) {
  switch (rows) {
    case 4: return quantized_pass<4, NT, ACCUMULATE>(format, a, r0, w, t0, height, bias, y, ldy);
    case 3: return quantized_pass<3, NT, ACCUMULATE>(format, a, r0, w, t0, height, bias, y, ldy);
    case 2: return quantized_pass<2, NT, ACCUMULATE>(format, a, r0, w, t0, height, bias, y, ldy);
    default: return quantized_pass<1, NT, ACCUMULATE>(format, a, r0, w, t0, height, bias, y, ldy);
  }
}

// y[m, n] (+)= x W^T + b, the rows of x already quantized into `a`: the whole tiles split evenly among the threads
// of the enclosing parallel region (each a contiguous run), the last, shorter tile to the last thread; a barrier
// at the end, as an orphaned `omp for` has. Outside a parallel region the caller does them all. Each run of
// STREAMS tiles meets every row of x, MAX_QROWS rows at a time, while it is in cache: a weight is read from memory
// once however many rows x has.
template <bool ACCUMULATE>
static inline void quantized_product_for(int format, const QuantizedRows& a, int64_t m, const uint8_t* w, int64_t n,
                                         const float* bias, float* y, int64_t ldy) {
  const int64_t whole = n / QTILE, threads = omp_get_num_threads(), thread = omp_get_thread_num();
  const int64_t first = whole * thread / threads, end = whole * (thread + 1) / threads;
  const int last_height = int(n % QTILE);
  for (int64_t t = first; t < end; t += STREAMS) {
    const bool full = t + STREAMS <= end;
    for (int64_t r0 = 0; r0 < m; r0 += MAX_QROWS) {
      const int rows = int(m - r0 < MAX_QROWS ? m - r0 : MAX_QROWS);
      if (full) {
        quantized_rows<STREAMS, ACCUMULATE>(rows, format, a, r0, w, t, QTILE, bias, y, ldy);
      } else {
        for (int64_t u = t; u < end; ++u) quantized_rows<1, ACCUMULATE>(rows, format, a, r0, w, u, QTILE, bias, y, ldy);
      }
    }
  }
  if (last_height && thread == threads - 1)
    for (int64_t r0 = 0; r0 < m; r0 += MAX_QROWS) {
      const int rows = int(m - r0 < MAX_QROWS ? m - r0 : MAX_QROWS);
      quantized_rows<1, ACCUMULATE>(rows, format, a, r0, w, whole, last_height, bias, y, ldy);
    }
#pragma omp barrier
}
