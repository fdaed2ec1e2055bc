// Every decoder layer of one decode step in a single call: float32, host memory, weights stored as panels.
//
// A decode step of a small model on a CPU is weight streaming plus, per layer, some twenty small ops that
// each cost a Python call and a dispatch. Here the step runs inside one OpenMP parallel region, the ops one
// after another with a barrier between them: RMSNorm, the fused q/k/v product (panel_tile.h), rotary
// embedding (rotate-half over the first 2*rotary_half dims), the K/V write into the paged cache, decode
// attention (paged_attention.h), the output product added to the residual, RMSNorm, the fused gate/up
// product, SiLU(gate) * up, and the down product added to the residual. The same arithmetic as the
// decoder's modules (runner/model/decoder.py) for Llama-style layers; see runner/host/decode_layers.py.
#include <cmath>
#include <cstdint>

#include "paged_attention.h"
#include "panel_tile.h"

// what each layer's entry in `weights` holds, in this order (null where the model has no such bias)
enum Weight { INPUT_NORM, QKV, QKV_BIAS, O, O_BIAS, POST_NORM, GATE_UP, GATE_UP_BIAS, DOWN, DOWN_BIAS, K_CACHE,
              V_CACHE, WEIGHTS_PER_LAYER };
// what `dims` holds, in this order
enum Dim { LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTERMEDIATE, ROTARY_HALF, QKV_WIDTH, GATE_UP_WIDTH,
           SLOTS_TOTAL, LD_SLOTS, DIMS };

extern "C" int bringup_decode_layers_abi(void) { return WEIGHTS_PER_LAYER * 100 + DIMS; }

static inline void rms_norm_rows_for(const float* x, int64_t rows, int64_t n, const float* weight, float eps,
                                     float* out) {
#pragma omp for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * n;
    float total = 0.f;
    for (int64_t i = 0; i < n; ++i) total += row[i] * row[i];
    const float inv = 1.f / std::sqrt(total / float(n) + eps);
    for (int64_t i = 0; i < n; ++i) out[r * n + i] = row[i] * inv * weight[i];
  }
}

static inline void rotate(float* head, const float* cos, const float* sin, int64_t half) {
  for (int64_t i = 0; i < half; ++i) {
    const float x1 = head[i], x2 = head[i + half];
    head[i] = x1 * cos[i] - x2 * sin[i];
    head[i + half] = x2 * cos[i] + x1 * sin[i];
  }
}

// x: the residual stream [batch, hidden], updated in place. rope_cos/sin: [positions, rotary_half] tables.
// context_slots: [batch, ld_slots], the first context_lens[b] of them read (the new token's slot included).
// work: batch * (hidden + qkv_width + heads * head_dim + gate_up_width + intermediate) floats.
extern "C" void bringup_decode_layers(float* x, int64_t batch, const int64_t* dims, const void* const* weights,
                                      const float* rope_cos, const float* rope_sin, const int64_t* positions,
                                      const int64_t* slot_mapping, const int64_t* context_slots,
                                      const int64_t* context_lens, float eps, float scale, float* work) {
  const int64_t hidden = dims[HIDDEN], heads = dims[HEADS], kv_heads = dims[KV_HEADS], head_dim = dims[HEAD_DIM];
  const int64_t inter = dims[INTERMEDIATE], half = dims[ROTARY_HALF], qkv_width = dims[QKV_WIDTH];
  const int64_t gate_up_width = dims[GATE_UP_WIDTH], slots_total = dims[SLOTS_TOTAL], ld_slots = dims[LD_SLOTS];
  const int64_t group = heads / kv_heads, q_width = heads * head_dim;
  float* normed = work;
  float* qkv = normed + batch * hidden;
  float* attn = qkv + batch * qkv_width;
  float* gate_up = attn + batch * q_width;
  float* act = gate_up + batch * gate_up_width;
#pragma omp parallel
  for (int64_t layer = 0; layer < dims[LAYERS]; ++layer) {
    const void* const* w = weights + layer * WEIGHTS_PER_LAYER;
    float* k_cache = (float*)w[K_CACHE];
    float* v_cache = (float*)w[V_CACHE];
    rms_norm_rows_for(x, batch, hidden, (const float*)w[INPUT_NORM], eps, normed);
    panel_rows_for<false>(normed, batch, hidden, (const float*)w[QKV], hidden, qkv_width,
                          (const float*)w[QKV_BIAS], qkv, qkv_width);
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < heads + kv_heads; ++h) {  // q heads, then k heads: rotated; k and v cached
        float* row = qkv + b * qkv_width;
        const int64_t position = positions[b];
        rotate(row + h * head_dim, rope_cos + position * half, rope_sin + position * half, half);
        if (h >= heads) {
          const int64_t kv = h - heads, slot = slot_mapping[b];
          const float* k = row + h * head_dim;
          const float* v = row + (heads + kv_heads + kv) * head_dim;
          std::memcpy(k_cache + (kv * slots_total + slot) * head_dim, k, head_dim * sizeof(float));
          std::memcpy(v_cache + (kv * slots_total + slot) * head_dim, v, head_dim * sizeof(float));
        }
      }
    }
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < kv_heads; ++h) {
        attend_kv_head(qkv + b * qkv_width + h * group * head_dim, group, head_dim,
                       k_cache + h * slots_total * head_dim, v_cache + h * slots_total * head_dim,
                       context_slots + b * ld_slots, context_lens[b], scale, attn + b * q_width + h * group * head_dim);
      }
    }
    panel_rows_for<true>(attn, batch, q_width, (const float*)w[O], q_width, hidden, (const float*)w[O_BIAS], x,
                         hidden);
    rms_norm_rows_for(x, batch, hidden, (const float*)w[POST_NORM], eps, normed);
    panel_rows_for<false>(normed, batch, hidden, (const float*)w[GATE_UP], hidden, gate_up_width,
                          (const float*)w[GATE_UP_BIAS], gate_up, gate_up_width);
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < inter; ++i) {
        const float g = gate_up[b * gate_up_width + i];
        act[b * inter + i] = g / (1.f + std::exp(-g)) * gate_up[b * gate_up_width + inter + i];
      }
    }
    panel_rows_for<true>(act, batch, inter, (const float*)w[DOWN], inter, hidden, (const float*)w[DOWN_BIAS], x,
                         hidden);
  }
}
