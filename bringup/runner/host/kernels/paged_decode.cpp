// Decode attention straight from the paged KV cache: one query token per sequence, float32 or bfloat16, host memory.
//
// Each (sequence, kv head) — split across OpenMP threads — is one attend_kv_head (paged_attention.h): its
// grouped query heads against the context read through its slots. See runner/host/paged_decode.py.
#include "paged_attention.h"

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
      const int64_t first = (b * heads + h * group) * head_dim;
      attend_kv_head(q + first, group, head_dim, k_cache + h * slots_total * head_dim,
                     v_cache + h * slots_total * head_dim, context_slots + b * ld_slots, lens[b], scale,
                     out + first);
    }
  }
}

// The same for a bfloat16 model: q, out and caches bfloat16; each group's queries widened (exact), its outputs
// already rounded to bfloat16 where the matmul-softmax modules round them (paged_attention.h), then stored.
extern "C" void bringup_paged_decode_bf16(const bf16* q, int64_t batch, int64_t heads, int64_t kv_heads,
                                          int64_t head_dim, const bf16* k_cache, const bf16* v_cache,
                                          int64_t slots_total, const int64_t* context_slots, int64_t ld_slots,
                                          const int64_t* lens, float scale, bf16* out) {
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
