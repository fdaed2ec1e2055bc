// Decode attention straight from the paged KV cache: one query token per sequence, float32, host memory.
//
// For each (sequence, kv head) — split across OpenMP threads — the grouped query heads are scored
// against the sequence's context read through its slots (no gather copy), softmaxed in float32, and
// the values summed with those weights. Same arithmetic as matmul-softmax; see runner/paged_decode.py.
#include <cmath>
#include <cstdint>
#include <vector>

static inline float dot(const float* a, const float* b, int64_t n) {
  float acc = 0.f;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

// q, out: [batch, heads, head_dim]; caches: [kv_heads, slots_total, head_dim];
// context_slots: [batch, ld_slots] (first lens[b] used); heads is a multiple of kv_heads.
extern "C" void bringup_paged_decode(const float* q, int64_t batch, int64_t heads, int64_t kv_heads,
                                     int64_t head_dim, const float* k_cache, const float* v_cache,
                                     int64_t slots_total, const int64_t* context_slots, int64_t ld_slots,
                                     const int64_t* lens, float scale, float* out) {
  const int64_t group = heads / kv_heads;
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < kv_heads; ++h) {
      const int64_t len = lens[b];
      const int64_t* slots = context_slots + b * ld_slots;
      const float* keys = k_cache + h * slots_total * head_dim;
      const float* values = v_cache + h * slots_total * head_dim;
      std::vector<float> scores(group * len), acc(group * head_dim, 0.f);
      for (int64_t l = 0; l < len; ++l) {
        const float* key = keys + slots[l] * head_dim;
        for (int64_t g = 0; g < group; ++g)
          scores[g * len + l] = dot(q + (b * heads + h * group + g) * head_dim, key, head_dim) * scale;
      }
      for (int64_t g = 0; g < group; ++g) {
        float* row = scores.data() + g * len;
        float top = -INFINITY, total = 0.f;
        for (int64_t l = 0; l < len; ++l) top = row[l] > top ? row[l] : top;
        for (int64_t l = 0; l < len; ++l) total += (row[l] = std::exp(row[l] - top));
        for (int64_t l = 0; l < len; ++l) row[l] /= total;
      }
      for (int64_t l = 0; l < len; ++l) {
        const float* value = values + slots[l] * head_dim;
        for (int64_t g = 0; g < group; ++g) {
          const float p = scores[g * len + l];
          float* dst = acc.data() + g * head_dim;
#pragma omp simd
          for (int64_t i = 0; i < head_dim; ++i) dst[i] += p * value[i];
        }
      }
      for (int64_t g = 0; g < group; ++g)
        for (int64_t i = 0; i < head_dim; ++i)
          out[(b * heads + h * group + g) * head_dim + i] = acc[g * head_dim + i];
    }
  }
}
