// Decode attention of one (sequence, kv head), straight from the paged KV cache, shared by paged_decode.cpp and
// decode_layers.cpp: the group of query heads is scored against the sequence's context read through its slots
// (no gather copy), softmaxed in float32, and the values summed with those weights — the same arithmetic as
// matmul-softmax. For a head_dim of 64 or 128 the work runs 16 lanes wide: sixteen keys' products at a time, their
// lane sums taken together (one transposing tree, not sixteen serial sums), and e^x by a polynomial per lane, within
// an ulp or two of std::exp (matmul-softmax's own exp is vectorised too). With a bfloat16 cache the values are widened (exact) and the results rounded where the
// matmul-softmax modules round them in bfloat16: the scores, the scaled scores, the probabilities and the output.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "panel_tile.h"

typedef float vec16 __attribute__((vector_size(64)));
typedef uint32_t word16 __attribute__((vector_size(64)));
typedef uint16_t half16 __attribute__((vector_size(32)));

// 16 consecutive values widened to float32 (a bfloat16's bits are a float32's upper half: exact)
static inline vec16 load_widened(const float* p) {
  vec16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

static inline vec16 load_widened(const bf16* p) {
  half16 h;
  std::memcpy(&h, p, sizeof h);
  const word16 w = __builtin_convertvector(h, word16) << 16;
  vec16 v;
  std::memcpy(&v, &w, sizeof v);
  return v;
}

// a . b in float32: 16 lanes in two independent accumulators (a serial scalar sum waits on every add's latency;
// the compiler kept `omp simd reduction` scalar here), then the lanes summed; a tail under 16 scalar
template <typename T>
static inline float dot(const float* a, const T* b, int64_t n) {
  vec16 even = {}, odd = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    even += load_widened(a + i) * load_widened(b + i);
    odd += load_widened(a + i + 16) * load_widened(b + i + 16);
  }
  for (; i + 16 <= n; i += 16) even += load_widened(a + i) * load_widened(b + i);
  even += odd;
  float acc = 0.f;
  for (int lane = 0; lane < 16; ++lane) acc += even[lane];
  for (; i < n; ++i) acc += a[i] * scalar(b[i]);
  return acc;
}

// acc[head_dim] = sum over l of weights[l] * values[slots[l]], each lane summed in l order
template <typename T>
static inline void weighted_sum(const float* weights, const T* values, const int64_t* slots, int64_t len,
                                int64_t head_dim, float* acc) {
  for (int64_t l = 0; l < len; ++l) {
    const T* value = values + slots[l] * head_dim;
#pragma omp simd
    for (int64_t i = 0; i < head_dim; ++i) acc[i] += weights[l] * scalar(value[i]);
  }
}

typedef int32_t int16v __attribute__((vector_size(64)));

// lane j of the result: the sum of v[j]'s sixteen lanes, halving the width at each level (15 shuffle-adds for all)
static inline vec16 lane_sums(const vec16* v) {
  const int16v halves[2] = {{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
                            {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}};
  const int16v quarters[2] = {{0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27},
                              {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31}};
  const int16v pairs[2] = {{0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29},
                           {2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31}};
  const int16v singles[2] = {{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30},
                             {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31}};
  vec16 a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i)
    a[i] = __builtin_shuffle(v[2 * i], v[2 * i + 1], halves[0]) + __builtin_shuffle(v[2 * i], v[2 * i + 1], halves[1]);
  for (int i = 0; i < 4; ++i)
    b[i] = __builtin_shuffle(a[2 * i], a[2 * i + 1], quarters[0]) +
           __builtin_shuffle(a[2 * i], a[2 * i + 1], quarters[1]);
  for (int i = 0; i < 2; ++i)
    c[i] = __builtin_shuffle(b[2 * i], b[2 * i + 1], pairs[0]) + __builtin_shuffle(b[2 * i], b[2 * i + 1], pairs[1]);
  return __builtin_shuffle(c[0], c[1], singles[0]) + __builtin_shuffle(c[0], c[1], singles[1]);
}

// round_bf16 (panel_tile.h) per lane
static inline vec16 round_bf16_lanes(vec16 x) {
  int16v bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & int32_t(0xFFFF0000u);
  vec16 out;
  std::memcpy(&out, &bits, sizeof out);
  return x != x ? x : out;
}

template <typename T>
static inline vec16 as_lanes(vec16 x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else return round_bf16_lanes(x);
}

// e^x per lane, for softmax's shifted scores (x <= 0): x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts), e^r by
// Cephes' expf polynomial, 2^n from exponent bits; 0 below the smallest normal result; NaN stays NaN
static inline vec16 exp_lanes(vec16 x) {
  const float floor_x = -87.3f;  // e^-87.3 is just above the smallest normal float
  const vec16 kept = x < floor_x ? vec16{} + floor_x : x;
  const vec16 fx = kept * 1.44269504088896341f + 0.5f;
  int16v n = __builtin_convertvector(fx, int16v);  // toward zero, then down to the floor
  n = __builtin_convertvector(n, vec16) > fx ? n - 1 : n;
  const vec16 nf = __builtin_convertvector(n, vec16);
  const vec16 r = kept - nf * 0.693359375f + nf * 2.12194440e-4f;
  vec16 p = 1.9875691500e-4f * r + 1.3981999507e-3f;
  p = ((((p * r + 8.3334519073e-3f) * r + 4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f) * (r * r) +
      r + 1.0f;
  const int16v bits = (n + 127) << 23;
  vec16 scale;
  std::memcpy(&scale, &bits, sizeof scale);
  const vec16 e = x < floor_x ? vec16{} : p * scale;
  return x != x ? x : e;
}

// count (<= 16) lanes of v to p
static inline void store_lanes(float* p, vec16 v, int64_t count) {
  if (count == 16) std::memcpy(p, &v, sizeof v);
  else std::memcpy(p, &v, size_t(count) * sizeof(float));
}

static inline vec16 load_lanes(const float* p, int64_t count, float pad) {
  vec16 v = vec16{} + pad;
  if (count == 16) std::memcpy(&v, p, sizeof v);
  else std::memcpy(&v, p, size_t(count) * sizeof(float));
  return v;
}

// the context's keys (or values) first..first+15, widened to float32 once for every query head of the group (a
// short tail: zeros)
template <int CHUNKS, typename T>
static inline void widen_block(const T* plane, const int64_t* slots, int64_t first, int64_t count,
                               vec16 (*rows)[CHUNKS]) {
  for (int64_t j = 0; j < 16; ++j)
    for (int c = 0; c < CHUNKS; ++c)
      rows[j][c] = j < count ? load_widened(plane + slots[first + j] * (16 * CHUNKS) + 16 * c) : vec16{};
}

// scores[g * len + l] = as<T>(as<T>(q_g . key_l) * scale) for the group's query heads, sixteen keys at a time
template <int CHUNKS, typename T>
static inline void key_scores(const float* q, int64_t group, const T* keys, const int64_t* slots, int64_t len,
                              float scale, float* scores) {
  vec16 block[16][CHUNKS];
  for (int64_t first = 0; first < len; first += 16) {
    const int64_t count = len - first < 16 ? len - first : 16;
    widen_block<CHUNKS>(keys, slots, first, count, block);
    for (int64_t g = 0; g < group; ++g) {
      const float* query = q + g * 16 * CHUNKS;
      vec16 products[16];
      for (int j = 0; j < 16; ++j) {
        vec16 acc = {};
        for (int c = 0; c < CHUNKS; ++c) acc += load_widened(query + 16 * c) * block[j][c];
        products[j] = acc;
      }
      store_lanes(scores + g * len + first, as_lanes<T>(as_lanes<T>(lane_sums(products)) * scale), count);
    }
  }
}

// row[l] = as<T>(e^(row[l] - max) / sum): softmax in place, sixteen lanes at a time (a short tail padded with -inf)
template <typename T>
static inline void softmax_lanes(float* row, int64_t len) {
  vec16 tops = vec16{} - INFINITY, totals = {};
  for (int64_t first = 0; first < len; first += 16) {
    const vec16 v = load_lanes(row + first, len - first < 16 ? len - first : 16, -INFINITY);
    tops = v > tops ? v : tops;
  }
  float top = -INFINITY, total = 0.f;
  for (int lane = 0; lane < 16; ++lane) top = tops[lane] > top ? tops[lane] : top;
  for (int64_t first = 0; first < len; first += 16) {
    const int64_t count = len - first < 16 ? len - first : 16;
    const vec16 e = exp_lanes(load_lanes(row + first, count, -INFINITY) - top);
    store_lanes(row + first, e, count);
    totals += e;
  }
  for (int lane = 0; lane < 16; ++lane) total += totals[lane];
  for (int64_t first = 0; first < len; first += 16) {
    const int64_t count = len - first < 16 ? len - first : 16;
    store_lanes(row + first, as_lanes<T>(load_lanes(row + first, count, 0.f) / total), count);
  }
}

// out[g * head_dim + i] = sum over l of weights[g * len + l] * value_l[i], each lane summed in l order
template <int CHUNKS, typename T>
static inline void weighted_sums(const float* weights, int64_t group, const T* values, const int64_t* slots,
                                 int64_t len, float* out) {
  vec16 block[16][CHUNKS];
  std::memset(out, 0, size_t(group * 16 * CHUNKS) * sizeof(float));
  for (int64_t first = 0; first < len; first += 16) {
    const int64_t count = len - first < 16 ? len - first : 16;
    widen_block<CHUNKS>(values, slots, first, count, block);
    for (int64_t g = 0; g < group; ++g) {
      vec16 sums[CHUNKS];
      std::memcpy(sums, out + g * 16 * CHUNKS, sizeof sums);
      const float* w = weights + g * len + first;
      for (int64_t j = 0; j < count; ++j)
        for (int c = 0; c < CHUNKS; ++c) sums[c] += w[j] * block[j][c];
      std::memcpy(out + g * 16 * CHUNKS, sums, sizeof sums);
    }
  }
}

// q, out: `group` rows of head_dim (contiguous; with T = bf16 they hold bfloat16 values); keys, values: one kv
// head's plane [slots_total, head_dim]; slots: the first `len` cache slots of the sequence's context. The group's
// query heads share each widened key and value.
template <int CHUNKS, typename T>
static inline void attend_lanes(const float* q, int64_t group, const T* keys, const T* values, const int64_t* slots,
                                int64_t len, float scale, float* out) {
  thread_local std::vector<float> scores, sums;
  if (int64_t(scores.size()) < group * len) scores.resize(size_t(group * len));
  if (int64_t(sums.size()) < group * 16 * CHUNKS) sums.resize(size_t(group * 16 * CHUNKS));
  key_scores<CHUNKS>(q, group, keys, slots, len, scale, scores.data());
  for (int64_t g = 0; g < group; ++g) softmax_lanes<T>(scores.data() + g * len, len);
  weighted_sums<CHUNKS>(scores.data(), group, values, slots, len, sums.data());
  for (int64_t i = 0; i < group * 16 * CHUNKS; ++i) out[i] = as<T>(sums[i]);
}

// any head_dim, one key at a time
template <typename T>
static inline void attend_scalar(const float* q, int64_t group, int64_t head_dim, const T* keys, const T* values,
                                 const int64_t* slots, int64_t len, float scale, float* out) {
  std::vector<float> scores(group * len), acc(group * head_dim, 0.f);
  for (int64_t l = 0; l < len; ++l) {
    const T* key = keys + slots[l] * head_dim;
    for (int64_t g = 0; g < group; ++g) scores[g * len + l] = as<T>(as<T>(dot(q + g * head_dim, key, head_dim)) * scale);
  }
  for (int64_t g = 0; g < group; ++g) {
    float* row = scores.data() + g * len;
    float top = -INFINITY, total = 0.f;
    for (int64_t l = 0; l < len; ++l) top = row[l] > top ? row[l] : top;
    for (int64_t l = 0; l < len; ++l) total += (row[l] = std::exp(row[l] - top));
    for (int64_t l = 0; l < len; ++l) row[l] = as<T>(row[l] / total);
    weighted_sum(row, values, slots, len, head_dim, acc.data() + g * head_dim);
  }
  for (int64_t i = 0; i < group * head_dim; ++i) out[i] = as<T>(acc[i]);
}

template <typename T>
static inline void attend_kv_head(const float* q, int64_t group, int64_t head_dim, const T* keys, const T* values,
                                  const int64_t* slots, int64_t len, float scale, float* out) {
  if (head_dim == 64) return attend_lanes<4>(q, group, keys, values, slots, len, scale, out);
  if (head_dim == 128) return attend_lanes<8>(q, group, keys, values, slots, len, scale, out);
  attend_scalar(q, group, head_dim, keys, values, slots, len, scale, out);
}
