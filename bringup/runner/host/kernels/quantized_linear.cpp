// y[m, n] = x[m, k] @ W^T + b for a few rows (decode steps), W weight-only quantized (int8 per output channel or
// int4 per group of 32, the layouts of bringup/runner/model/quantized_weights.py), x, b and y float32.
//
// Each weight row is streamed once per call and dequantized in registers (int8/uint4 codes widened to float32),
// the products accumulated in float32 and scaled once per row (int8) or per block (int4); the rows of x reuse each
// widened weight vector from registers. int4 adds m * sum(x over the block) per block, with the block sums of x
// computed once per call. Output rows are split across OpenMP threads (torch's runtime) in chunks, so a one-row
// product streams weights on every core. Built at run time with -O3 -march=native; see host/quantized.py.
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#ifdef __AVX2__
#include <immintrin.h>
#endif

typedef float vec8 __attribute__((vector_size(32)));

static const int64_t GROUP = 32, BLOCK_BYTES = 8 + GROUP / 2, SCALE_BYTES = 4;
static const int MAX_ROWS = 4;  // rows of x per pass over a weight row (8 accumulators + weights in registers)
static const int64_t CHUNK = 8;  // output rows per OpenMP work item

static inline vec8 load_x(const float* p) {
  vec8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

static inline float total(vec8 v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

static inline float read_float(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}

static inline vec8 as_vec8(const float* f) {
  vec8 v;
  std::memcpy(&v, f, sizeof v);
  return v;
}

// 16 int8 codes widened to float32: codes 0-7 in lo, 8-15 in hi
static inline void widen_int8(const uint8_t* p, vec8& lo, vec8& hi) {
#ifdef __AVX2__
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  lo = (vec8)_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
  hi = (vec8)_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)));
#else
  float f[16];
  for (int i = 0; i < 16; ++i) f[i] = float(int8_t(p[i]));
  lo = as_vec8(f), hi = as_vec8(f + 8);
#endif
}

// 16 bytes of int4 codes widened to float32: codes 0-7, 8-15 (low nibbles), 16-23, 24-31 (high nibbles)
static inline void widen_int4(const uint8_t* p, vec8 out[4]) {
#ifdef __AVX2__
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), mask = _mm_set1_epi8(15);
  const __m128i lo = _mm_and_si128(q, mask), hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
  out[0] = (vec8)_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
  out[1] = (vec8)_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
  out[2] = (vec8)_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
  out[3] = (vec8)_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
#else
  float f[32];
  for (int i = 0; i < 16; ++i) f[i] = float(p[i] & 15), f[i + 16] = float(p[i] >> 4);
  for (int j = 0; j < 4; ++j) out[j] = as_vec8(f + 8 * j);
#endif
}

// ROWS rows of x (stride ldx) against one int8 weight row of k codes and its scale
template <int ROWS>
static inline void int8_row(const float* x, int64_t ldx, const uint8_t* row, int64_t k, float* out) {
  vec8 acc[ROWS][2];
  for (int r = 0; r < ROWS; ++r) acc[r][0] = acc[r][1] = vec8{};
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    vec8 lo, hi;
    widen_int8(row + i, lo, hi);
    for (int r = 0; r < ROWS; ++r) {
      acc[r][0] += load_x(x + r * ldx + i) * lo;
      acc[r][1] += load_x(x + r * ldx + i + 8) * hi;
    }
  }
  const float scale = read_float(row + k);
  for (int r = 0; r < ROWS; ++r) {
    float s = total(acc[r][0] + acc[r][1]);
    for (int64_t j = i; j < k; ++j) s += x[r * ldx + j] * float(int8_t(row[j]));
    out[r] = scale * s;
  }
}

// ROWS rows of x against one int4 weight row of k / 32 blocks; xsum[r * blocks + b]: the sum of x row r over block b
template <int ROWS>
static inline void int4_row(const float* x, int64_t ldx, const float* xsum, const uint8_t* row, int64_t blocks,
                            float* out) {
  vec8 acc[ROWS];
  float offset[ROWS];
  for (int r = 0; r < ROWS; ++r) acc[r] = vec8{}, offset[r] = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = row + b * BLOCK_BYTES;
    const float d = read_float(block), m = read_float(block + 4);
    vec8 w[4];
    widen_int4(block + 8, w);
    for (int r = 0; r < ROWS; ++r) {
      const float* xb = x + r * ldx + b * GROUP;
      const vec8 dot = (load_x(xb) * w[0] + load_x(xb + 8) * w[1]) + (load_x(xb + 16) * w[2] + load_x(xb + 24) * w[3]);
      acc[r] += d * dot;
      offset[r] += m * xsum[r * blocks + b];
    }
  }
  for (int r = 0; r < ROWS; ++r) out[r] = total(acc[r]) + offset[r];
}

template <int ROWS>
static inline void int8_rows(const float* x, int64_t ldx, const uint8_t* w, int64_t k, int64_t j, float* y,
                             int64_t ldy) {
  float out[ROWS];
  int8_row<ROWS>(x, ldx, w + j * (k + SCALE_BYTES), k, out);
  for (int r = 0; r < ROWS; ++r) y[r * ldy + j] = out[r];
}

template <int ROWS>
static inline void int4_rows(const float* x, int64_t ldx, const float* xsum, const uint8_t* w, int64_t blocks,
                             int64_t j, float* y, int64_t ldy) {
  float out[ROWS];
  int4_row<ROWS>(x, ldx, xsum, w + j * blocks * BLOCK_BYTES, blocks, out);
  for (int r = 0; r < ROWS; ++r) y[r * ldy + j] = out[r];
}

// every output column j for rows [r0, r0 + rows) of x, rows <= MAX_ROWS
template <typename Row>
static inline void for_rows(int rows, Row&& row) {
  switch (rows) {
    case 4: return row(std::integral_constant<int, 4>{});
    case 3: return row(std::integral_constant<int, 3>{});
    case 2: return row(std::integral_constant<int, 2>{});
    default: return row(std::integral_constant<int, 1>{});
  }
}

static inline void add_bias(const float* bias, int64_t m, int64_t n, float* y, int64_t ldy) {
  if (!bias) return;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) y[r * ldy + j] += bias[j];
}

extern "C" int bringup_quantized_group(void) { return int(GROUP); }

extern "C" void bringup_int8_linear(const float* x, int64_t m, int64_t ldx, const uint8_t* w, int64_t k, int64_t n,
                                    const float* bias, float* y, int64_t ldy) {
  const int64_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t r0 = 0; r0 < m; r0 += MAX_ROWS) {
      const int rows = int(m - r0 < MAX_ROWS ? m - r0 : MAX_ROWS);
      for (int64_t j = c * CHUNK; j < n && j < (c + 1) * CHUNK; ++j)
        for_rows(rows, [&](auto R) { int8_rows<R.value>(x + r0 * ldx, ldx, w, k, j, y + r0 * ldy, ldy); });
    }
  }
  add_bias(bias, m, n, y, ldy);
}

extern "C" void bringup_int4_linear(const float* x, int64_t m, int64_t ldx, const uint8_t* w, int64_t k, int64_t n,
                                    const float* bias, float* y, int64_t ldy) {
  const int64_t blocks = k / GROUP, chunks = (n + CHUNK - 1) / CHUNK;
  std::vector<float> xsum(size_t(m * blocks));
  for (int64_t r = 0; r < m; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      float s = 0;
      for (int64_t i = 0; i < GROUP; ++i) s += x[r * ldx + b * GROUP + i];
      xsum[r * blocks + b] = s;
    }
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t r0 = 0; r0 < m; r0 += MAX_ROWS) {
      const int rows = int(m - r0 < MAX_ROWS ? m - r0 : MAX_ROWS);
      for (int64_t j = c * CHUNK; j < n && j < (c + 1) * CHUNK; ++j)
        for_rows(rows, [&](auto R) {
          int4_rows<R.value>(x + r0 * ldx, ldx, xsum.data() + r0 * blocks, w, blocks, j, y + r0 * ldy, ldy);
        });
    }
  }
  add_bias(bias, m, n, y, ldy);
}
