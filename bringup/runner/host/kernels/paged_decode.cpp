// Decode attention straight from the paged KV cache: one query token per sequence, float32 or bfloat16, host memory.
//
// Each (sequence, kv head) — split across OpenMP threads — is one attend_kv_head (paged_attention.h): its
// grouped query heads against the context read through its slots. See runner/host/paged_decode.py.
#include "paged_attention.h"

// q, out: [batch, heads, head_dim]; caches: [kv_heads, slots_total, head_dim];
// context_slots: [batch, ld_slots] (first lens[b] used); heads is a multiple of kv_heads. Each group's queries are
// widened to float32 (exact for bfloat16) and its outputs, already rounded where the matmul-softmax modules round them
// (paged_attention.h), stored in T.
template <typename T>
static void paged_decode(const T* q, int64_t batch, int64_t heads, int64_t kv_heads, int64_t head_dim,
                         const T* k_cache, const T* v_cache, int64_t slots_total, const int64_t* context_slots,
                         int64_t ld_slots, const int64_t* lens, float scale, T* out) {
  const int64_t group = heads / kv_heads;
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < kv_heads; ++h) {
      thread_local std::vector<float> queries, sums;
      queries.resize(size_t(group * head_dim));
      sums.resize(size_t(group * head_dim));
      const int64_t first = (b * heads + h * group) * head_dim;
      for (int64_t i = 0; i < group * head_dim; ++i) queries[i] = scalar(q[first + i]);
      attend_kv_head(queries.data(), group, head_dim, k_cache + h * slots_total * head_dim,
                     v_cache + h * slots_total * head_dim, context_slots + b * ld_slots, lens[b], scale, sums.data());
      for (int64_t i = 0; i < group * head_dim; ++i) put(out + first + i, sums[i]);
    }
  }
}

#define PAGED_DECODE(SUFFIX, T)                                                                                     \
  extern "C" void bringup_paged_decode##SUFFIX(const T* q, int64_t batch, int64_t heads, int64_t kv_heads,          \
                                               int64_t head_dim, const T* k_cache, const T* v_cache,                \
                                               int64_t slots_total, const int64_t* context_slots, int64_t ld_slots, \
                                               const int64_t* lens, float scale, T* out) {                          \
    paged_decode(q, batch, heads, kv_heads, head_dim, k_cache, v_cache, slots_total, context_slots, ld_slots, lens,  \
                 scale, out);                                                                                        \
  }

PAGED_DECODE(, float)
PAGED_DECODE(_bf16, bf16)
