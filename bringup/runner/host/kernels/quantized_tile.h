// The quantized product shared by quantized_linear.cpp and decode_layers.cpp: y[m, n] (+)= x[m, k] @ W^T + b for a
// few rows, W stored as bringup/runner/model/quantized_weights.py lays it out (int8: a row's k codes, then k / 32
// float32 scales; int4: k / 32 blocks of float32 d, float32 m and 16 bytes of nibbles), x and y float32.
//
// The rows of x are first quantized per block of 32 to int8 codes and a float32 scale (as the reference does), so
// each block's product is an exact integer dot product of 32 codes: `vpdpbusd` (VNNI) where the CPU has it, else
// AVX2's `vpmaddubsw` + `vpmaddwd`, else plain C. `vpdpbusd` multiplies unsigned by signed bytes: int4 codes
// (0..15) are unsigned already; for int8 the activation's sign moves onto the weight (|a| * sign(a) w), as
// llama.cpp does. A block's integer sum is scaled by d_w * d_a into a float32 accumulator; int4 adds
// m_w * d_a * (sum of the block's activation codes). Each pass streams NW weight rows (several streams in flight
// per core) and feeds up to MAX_QROWS rows of x from cache.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

typedef float qvec8 __attribute__((vector_size(32)));

static const int64_t QGROUP = 32, INT4_BLOCK_BYTES = 8 + QGROUP / 2, INT8_SCALE_BYTES = 4;
static const int MAX_QROWS = 4;
static const int STREAMS = 4;  // weight rows per pass
enum QuantizedFormat { FORMAT_INT8 = 1, FORMAT_INT4 = 2 };

// x's rows as int8 blocks: codes [m][k], scales and scale * (sum of codes) [m][k / 32]
struct QuantizedRows {
  int8_t* codes;
  float* scales;
  float* sums;
  int64_t k;
};

static inline float read_f32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}

static inline float qtotal(qvec8 v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

static inline int64_t row_bytes(int format, int64_t k) {
  return format == FORMAT_INT8 ? k + k / QGROUP * INT8_SCALE_BYTES : k / QGROUP * INT4_BLOCK_BYTES;
}

// Block b of row r of x: d = max|x| / 127, q = round-half-even(x * (1 / d)). A block holding a NaN or an infinity
// gets a NaN scale, so every output it feeds is NaN (as the reference's would be).
static inline void quantize_block(const float* x, int64_t ldx, int64_t r, int64_t b, const QuantizedRows& a) {
  const float* xb = x + r * ldx + b * QGROUP;
  float amax = 0.f;
  bool finite = true;
  for (int i = 0; i < QGROUP; ++i) {
    amax = std::fmax(amax, std::fabs(xb[i]));
    finite = finite && std::isfinite(xb[i]);
  }
  const float d = amax / 127.f, inverse = d > 0.f ? 1.f / d : 0.f;
  int8_t* codes = a.codes + r * a.k + b * QGROUP;
  int sum = 0;
  for (int i = 0; i < QGROUP; ++i) {
    const float q = finite ? std::fmin(std::fmax(std::nearbyint(xb[i] * inverse), -127.f), 127.f) : 0.f;
    codes[i] = int8_t(q);
    sum += int(q);
  }
  const int64_t rb = r * (a.k / QGROUP) + b;
  a.scales[rb] = finite ? d : NAN;
  a.sums[rb] = a.scales[rb] * float(sum);
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

#if defined(__AVX2__)
// the 32 products of a block summed in 8 int32 lanes. int8 x int8: |a| (unsigned) times w with a's sign
static inline __m256i dot_int8(__m256i a, __m256i w) {
  const __m256i ua = _mm256_sign_epi8(a, a), sw = _mm256_sign_epi8(w, a);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), ua, sw);
#elif defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), ua, sw);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(ua, sw), _mm256_set1_epi16(1));
#endif
}

// int4 codes (unsigned, 0..15) times int8 activation codes
static inline __m256i dot_int4(__m256i w, __m256i a) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, a);
#elif defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w, a);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1));
#endif
}

static inline __m256i load32(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// 16 bytes of nibbles as 32 codes in order: low nibbles are codes 0-15, high nibbles 16-31
static inline __m256i unpack_int4(const uint8_t* p) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), mask = _mm_set1_epi8(15);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), mask), _mm_and_si128(q, mask));
}

static inline qvec8 as_float(__m256i v) { return (qvec8)_mm256_cvtepi32_ps(v); }
#endif

#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512F__)
#define QUANTIZED_512 1
// Two blocks (64 codes) at once in 512-bit registers; 32-bit lanes 0-7 hold the first block's sums, 8-15 the second's.
// int8 x int8 with unsigned activations a + 128: the dot product less 128 * sum(w), sum(w) from a second vpdpbusd.
static inline __m512i dot2_int8(__m512i a_plus_128, __m512i w) {
  const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), a_plus_128, w);
  const __m512i wsum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), w);
  return _mm512_sub_epi32(dot, _mm512_slli_epi32(wsum, 7));
}

// the two floats at p as [p[0] x 8, p[1] x 8]
static inline __m512 pair16(const float* p) {
  const __m128 two = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(p)));
  return _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                               _mm512_castps128_ps512(two));
}

static inline __m512 pair16(float first, float second) {
  return _mm512_mask_broadcastss_ps(_mm512_set1_ps(first), 0xFF00, _mm_set_ss(second));
}

// two int4 blocks' nibbles (16 bytes each) as their 64 codes in order
static inline __m512i unpack2_int4(const uint8_t* first, const uint8_t* second) {
  const __m256i q = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(second)),
                                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(first)));
  const __m256i mask = _mm256_set1_epi8(15);
  const __m256i lo = _mm256_and_si256(q, mask), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
  const __m512i joined = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);  // lo0 lo1 hi0 hi1
  return _mm512_shuffle_i64x2(joined, joined, _MM_SHUFFLE(3, 1, 2, 0));            // lo0 hi0 lo1 hi1
}
#endif

// out[r][j] = x row r . weight row j (ROWS rows of x, NW weight rows starting at w, rows `bytes` apart)
template <int ROWS, int NW>
static inline void int8_tile(const QuantizedRows& a, const uint8_t* w, int64_t bytes, float out[ROWS][NW]) {
  const int64_t k = a.k, blocks = k / QGROUP;
#if defined(QUANTIZED_512)
  __m512 acc[ROWS][NW];
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < NW; ++j) acc[r][j] = _mm512_setzero_ps();
  const __m512i bias = _mm512_set1_epi8(char(0x80));
  int64_t b = 0;
  for (; b + 2 <= blocks; b += 2) {
    __m512i av[ROWS];
    __m512 as[ROWS];
    for (int r = 0; r < ROWS; ++r) {
      av[r] = _mm512_xor_si512(_mm512_loadu_si512(a.codes + r * k + b * QGROUP), bias);
      as[r] = pair16(a.scales + r * blocks + b);
    }
    for (int j = 0; j < NW; ++j) {
      const uint8_t* row = w + j * bytes;
      const __m512i wv = _mm512_loadu_si512(row + b * QGROUP);
      const __m512 dw = pair16(reinterpret_cast<const float*>(row + k) + b);
      for (int r = 0; r < ROWS; ++r)
        acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot2_int8(av[r], wv)), _mm512_mul_ps(dw, as[r]), acc[r][j]);
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < NW; ++j) {
      float s = _mm512_reduce_add_ps(acc[r][j]);
      if (b < blocks) {
        const uint8_t* row = w + j * bytes;
        const qvec8 last = as_float(dot_int8(load32(a.codes + r * k + b * QGROUP), load32(row + b * QGROUP)));
        s += qtotal(last) * (read_f32(row + k + b * INT8_SCALE_BYTES) * a.scales[r * blocks + b]);
      }
      out[r][j] = s;
    }
#elif defined(__AVX2__)
  qvec8 acc[ROWS][NW];
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < NW; ++j) acc[r][j] = qvec8{};
  for (int64_t b = 0; b < blocks; ++b) {
    __m256i av[ROWS];
    for (int r = 0; r < ROWS; ++r) av[r] = load32(a.codes + r * k + b * QGROUP);
    for (int j = 0; j < NW; ++j) {
      const uint8_t* row = w + j * bytes;
      const __m256i wv = load32(row + b * QGROUP);
      const float dw = read_f32(row + k + b * INT8_SCALE_BYTES);
      for (int r = 0; r < ROWS; ++r) acc[r][j] += as_float(dot_int8(av[r], wv)) * (dw * a.scales[r * blocks + b]);
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < NW; ++j) out[r][j] = qtotal(acc[r][j]);
#else
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < NW; ++j) {
      const uint8_t* row = w + j * bytes;
      float s = 0.f;
      for (int64_t b = 0; b < blocks; ++b) {
        int dot = 0;
        for (int i = 0; i < QGROUP; ++i) dot += int(a.codes[r * k + b * QGROUP + i]) * int(int8_t(row[b * QGROUP + i]));
        s += float(dot) * (read_f32(row + k + b * INT8_SCALE_BYTES) * a.scales[r * blocks + b]);
      }
      out[r][j] = s;
    }
#endif
}

template <int ROWS, int NW>
static inline void int4_tile(const QuantizedRows& a, const uint8_t* w, int64_t bytes, float out[ROWS][NW]) {
  const int64_t k = a.k, blocks = k / QGROUP;
  float offset[ROWS][NW];
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < NW; ++j) offset[r][j] = 0.f;
#if defined(QUANTIZED_512)
  __m512 acc[ROWS][NW];
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < NW; ++j) acc[r][j] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= blocks; b += 2) {
    __m512i av[ROWS];
    __m512 as[ROWS];
    for (int r = 0; r < ROWS; ++r) {
      av[r] = _mm512_loadu_si512(a.codes + r * k + b * QGROUP);
      as[r] = pair16(a.scales + r * blocks + b);
    }
    for (int j = 0; j < NW; ++j) {
      const uint8_t* first = w + j * bytes + b * INT4_BLOCK_BYTES;
      const uint8_t* second = first + INT4_BLOCK_BYTES;
      const __m512i wv = unpack2_int4(first + 8, second + 8);
      const __m512 dw = pair16(read_f32(first), read_f32(second));
      const float m0 = read_f32(first + 4), m1 = read_f32(second + 4);
      for (int r = 0; r < ROWS; ++r) {
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv, av[r]);
        acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, as[r]), acc[r][j]);
        offset[r][j] += m0 * a.sums[r * blocks + b] + m1 * a.sums[r * blocks + b + 1];
      }
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < NW; ++j) {
      float s = _mm512_reduce_add_ps(acc[r][j]);
      if (b < blocks) {
        const uint8_t* block = w + j * bytes + b * INT4_BLOCK_BYTES;
        const qvec8 last = as_float(dot_int4(unpack_int4(block + 8), load32(a.codes + r * k + b * QGROUP)));
        s += qtotal(last) * (read_f32(block) * a.scales[r * blocks + b]);
        offset[r][j] += read_f32(block + 4) * a.sums[r * blocks + b];
      }
      out[r][j] = s + offset[r][j];
    }
#elif defined(__AVX2__)
  qvec8 acc[ROWS][NW];
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < NW; ++j) acc[r][j] = qvec8{};
  for (int64_t b = 0; b < blocks; ++b) {
    __m256i av[ROWS];
    for (int r = 0; r < ROWS; ++r) av[r] = load32(a.codes + r * k + b * QGROUP);
    for (int j = 0; j < NW; ++j) {
      const uint8_t* block = w + j * bytes + b * INT4_BLOCK_BYTES;
      const float dw = read_f32(block), mw = read_f32(block + 4);
      const __m256i wv = unpack_int4(block + 8);
      for (int r = 0; r < ROWS; ++r) {
        acc[r][j] += as_float(dot_int4(wv, av[r])) * (dw * a.scales[r * blocks + b]);
        offset[r][j] += mw * a.sums[r * blocks + b];
      }
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < NW; ++j) out[r][j] = qtotal(acc[r][j]) + offset[r][j];
#else
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < NW; ++j) {
      float s = 0.f;
      for (int64_t b = 0; b < blocks; ++b) {
        const uint8_t* block = w + j * bytes + b * INT4_BLOCK_BYTES;
        int dot = 0;
        for (int i = 0; i < QGROUP / 2; ++i)
          dot += int(a.codes[r * k + b * QGROUP + i]) * int(block[8 + i] & 15) +
                 int(a.codes[r * k + b * QGROUP + i + QGROUP / 2]) * int(block[8 + i] >> 4);
        s += float(dot) * (read_f32(block) * a.scales[r * blocks + b]);
        offset[r][j] += read_f32(block + 4) * a.sums[r * blocks + b];
      }
      out[r][j] = s + offset[r][j];
    }
#endif
}

// rows [r0, r0 + ROWS) of x against weight rows [j0, j0 + NW), written (or added) into y with the bias
template <int ROWS, int NW, bool ACCUMULATE>
static inline void quantized_tile(int format, const QuantizedRows& a, int64_t r0, const uint8_t* w, int64_t j0,
                                  const float* bias, float* y, int64_t ldy) {
  const int64_t bytes = row_bytes(format, a.k), blocks = a.k / QGROUP;
  const QuantizedRows rows{a.codes + r0 * a.k, a.scales + r0 * blocks, a.sums + r0 * blocks, a.k};
  float out[ROWS][NW];
  if (format == FORMAT_INT8) int8_tile<ROWS, NW>(rows, w + j0 * bytes, bytes, out);
  else int4_tile<ROWS, NW>(rows, w + j0 * bytes, bytes, out);
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < NW; ++j) {
      float* dst = y + (r0 + r) * ldy + j0 + j;
      const float v = out[r][j] + (bias ? bias[j0 + j] : 0.f);
      *dst = ACCUMULATE ? *dst + v : v;
    }
}

template <int NW, bool ACCUMULATE>
static inline void quantized_rows(int rows, int format, const QuantizedRows& a, int64_t r0, const uint8_t* w,
                                  int64_t j0, const float* bias, float* y, int64_t ldy) {
  switch (rows) {
    case 4: return quantized_tile<4, NW, ACCUMULATE>(format, a, r0, w, j0, bias, y, ldy);
    case 3: return quantized_tile<3, NW, ACCUMULATE>(format, a, r0, w, j0, bias, y, ldy);
    case 2: return quantized_tile<2, NW, ACCUMULATE>(format, a, r0, w, j0, bias, y, ldy);
    default: return quantized_tile<1, NW, ACCUMULATE>(format, a, r0, w, j0, bias, y, ldy);
  }
}

// y[m, n] (+)= x W^T + b, the rows of x already quantized into `a`: weight rows in groups of STREAMS shared among the
// threads of the enclosing parallel region (an orphaned `omp for`); outside one, the caller does them all
template <bool ACCUMULATE>
static inline void quantized_product_for(int format, const QuantizedRows& a, int64_t m, const uint8_t* w, int64_t n,
                                         const float* bias, float* y, int64_t ldy) {
  const int64_t items = (n + STREAMS - 1) / STREAMS;
#pragma omp for schedule(static)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t j0 = item * STREAMS;
    for (int64_t r0 = 0; r0 < m; r0 += MAX_QROWS) {
      const int rows = int(m - r0 < MAX_QROWS ? m - r0 : MAX_QROWS);
      if (j0 + STREAMS <= n) {
        quantized_rows<STREAMS, ACCUMULATE>(rows, format, a, r0, w, j0, bias, y, ldy);
      } else {
        for (int64_t j = j0; j < n; ++j) quantized_rows<1, ACCUMULATE>(rows, format, a, r0, w, j, bias, y, ldy);
      }
    }
  }
}
