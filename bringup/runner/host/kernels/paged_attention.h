// Decode attention of one (sequence, kv head), straight from the paged KV cache, shared by paged_decode.cpp and
// decode_layers.cpp: the group of query heads is scored against the sequence's context read through its slots
// (no gather copy), softmaxed in float32, and the values summed with those weights — the same arithmetic as
// matmul-softmax. With a bfloat16 cache the values are widened (exact) and the results rounded where the
// matmul-softmax modules round them in bfloat16: the scores, the scaled scores, the probabilities and the output.
#pragma once
#include <cmath>
#include <cstdint>
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

// the same for head_dim = 16 * CHUNKS, the sums held in registers across the context (same order, same result)
template <int CHUNKS, typename T>
static inline void weighted_sum(const float* weights, const T* values, const int64_t* slots, int64_t len,
                                float* acc) {
  vec16 sums[CHUNKS] = {};
  for (int64_t l = 0; l < len; ++l) {
    const T* value = values + slots[l] * (16 * CHUNKS);
    for (int c = 0; c < CHUNKS; ++c) sums[c] += weights[l] * load_widened(value + 16 * c);
  }
  std::memcpy(acc, sums, sizeof sums);
}

// q, out: `group` rows of head_dim (contiguous; with T = bf16 they hold bfloat16 values); keys, values: one kv
// head's plane [slots_total, head_dim]; slots: the first `len` cache slots of the sequence's context
template <typename T>
static inline void attend_kv_head(const float* q, int64_t group, int64_t head_dim, const T* keys, const T* values,
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
  }
  for (int64_t g = 0; g < group; ++g) {
    const float* weights = scores.data() + g * len;
    if (head_dim == 64) weighted_sum<4>(weights, values, slots, len, acc.data() + g * head_dim);
    else if (head_dim == 128) weighted_sum<8>(weights, values, slots, len, acc.data() + g * head_dim);
    else weighted_sum(weights, values, slots, len, head_dim, acc.data() + g * head_dim);
  }
  for (int64_t i = 0; i < group * head_dim; ++i) out[i] = as<T>(acc[i]);
}
