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

template <typename T>
static inline float dot(const float* a, const T* b, int64_t n) {
  float acc = 0.f;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) acc += a[i] * scalar(b[i]);
  return acc;
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
  for (int64_t l = 0; l < len; ++l) {
    const T* value = values + slots[l] * head_dim;
    for (int64_t g = 0; g < group; ++g) {
      const float p = scores[g * len + l];
      float* dst = acc.data() + g * head_dim;
#pragma omp simd
      for (int64_t i = 0; i < head_dim; ++i) dst[i] += p * scalar(value[i]);
    }
  }
  for (int64_t i = 0; i < group * head_dim; ++i) out[i] = as<T>(acc[i]);
}
