// Every decoder layer of one decode step in a single call: float32 or bfloat16, host memory, weights stored as
// panels, or (float32 only) int8 / int4 in blocks of 32 (quantized_tile.h), as dims[WEIGHT_FORMAT] says.
//
// A decode step of a small model on a CPU is weight streaming plus, per layer, some twenty small ops that
// each cost a Python call and a dispatch. Here the step runs inside one OpenMP parallel region, the ops one
// after another with a barrier between them: RMSNorm, the fused q/k/v product (panel_tile.h), rotary
// embedding (rotate-half over the first 2*rotary_half dims), the K/V write into the paged cache, decode
// attention (paged_attention.h), the output product added to the residual, RMSNorm, the fused gate/up
// product, SiLU(gate) * up, and the down product added to the residual. The same arithmetic as the
// decoder's modules (runner/model/decoder.py) for Llama-style layers; see runner/host/decode_layers.py.
// In bfloat16 every value is rounded where the modules' bfloat16 ops round it (as<T>), and computed in float32
// in between, as torch computes a bfloat16 op; the products accumulate in float32 and round once.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include <vector>

#include <omp.h>

#include "paged_attention.h"
#include "panel_tile.h"
#include "quantized_tile.h"

// what each layer's entry in `weights` holds, in this order (null where the model has no such bias)
enum Weight { INPUT_NORM, QKV, QKV_BIAS, O, O_BIAS, POST_NORM, GATE_UP, GATE_UP_BIAS, DOWN, DOWN_BIAS, K_CACHE,
              V_CACHE, WEIGHTS_PER_LAYER };
// what `dims` holds, in this order
enum Dim { LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTERMEDIATE, ROTARY_HALF, QKV_WIDTH, GATE_UP_WIDTH,
           SLOTS_TOTAL, WEIGHT_FORMAT, LD_SLOTS, DIMS };
static const int FORMAT_PANELS = 0;  // else quantized_tile.h's FORMAT_INT8 / FORMAT_INT4

extern "C" int bringup_decode_layers_abi(void) { return WEIGHTS_PER_LAYER * 100 + DIMS; }

// out (float32, holding T values): in bfloat16 the normalised row is rounded before the scale, as Llama's norm does
template <typename T>
static inline void rms_norm_rows_for(const T* x, int64_t rows, int64_t n, const T* weight, float eps, float* out) {
#pragma omp for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * n;
    float total = 0.f;
    for (int64_t i = 0; i < n; ++i) total += scalar(row[i]) * scalar(row[i]);
    const float inv = 1.f / std::sqrt(total / float(n) + eps);
    for (int64_t i = 0; i < n; ++i) out[r * n + i] = as<T>(as<T>(scalar(row[i]) * inv) * scalar(weight[i]));
  }
}

template <typename T>
static inline void rotate(T* head, const T* cos, const T* sin, int64_t half) {
  for (int64_t i = 0; i < half; ++i) {
    const float x1 = scalar(head[i]), x2 = scalar(head[i + half]), c = scalar(cos[i]), s = scalar(sin[i]);
    put(head + i, as<T>(x1 * c) - as<T>(x2 * s));
    put(head + i + half, as<T>(x2 * c) + as<T>(x1 * s));
  }
}

// y = y + p, rounded once (in bfloat16 the product p was rounded first, as the modules' residual add is)
template <typename T>
static inline void add_rows_for(T* y, const T* p, int64_t rows, int64_t n) {
#pragma omp for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) put(y + r * n + i, scalar(y[r * n + i]) + scalar(p[r * n + i]));
}

// y (+)= x W^T + b for weights in `format`: panels of T, or (T float32) int8 / int4 blocks, x quantized into `a`
template <bool ACCUMULATE, typename T>
static inline void product_for(int format, const float* x, int64_t m, int64_t k, const void* w, int64_t n,
                               const T* bias, T* y, const QuantizedRows& room) {
  if (format == FORMAT_PANELS) return panel_rows_for<ACCUMULATE>(x, m, k, (const T*)w, k, n, bias, y, n);
  if constexpr (std::is_same_v<T, float>) {
    // each thread quantizes the few rows of x into its own room: one barrier less per product
    const int64_t thread = omp_get_thread_num(), codes = room.k, blocks = room.k / QGROUP;
    QuantizedRows a{room.codes + thread * codes, room.scales + thread * blocks, room.sums + thread * blocks, k};
    quantize_rows(x, m, k, a);
    quantized_product_for<ACCUMULATE>(format, a, m, (const uint8_t*)w, n, bias, y, n);
  }
}

// the product x W^T + b added to the residual y: in float32 in one pass; in bfloat16 rounded, then added
template <typename T>
static inline void residual_product_for(int format, const float* x, int64_t m, int64_t k, const void* w, int64_t n,
                                        const T* bias, T* y, T* scratch, const QuantizedRows& a) {
  if constexpr (std::is_same_v<T, float>) {
    product_for<true>(format, x, m, k, w, n, bias, y, a);
  } else {
    product_for<false>(format, x, m, k, w, n, bias, scratch, a);
    add_rows_for(y, scratch, m, n);
  }
}

// x: the residual stream [batch, hidden], updated in place. rope_cos/sin: [positions, rotary_half] tables.
// context_slots: [batch, ld_slots], the first context_lens[b] of them read (the new token's slot included).
// work: batch * (2 * hidden + qkv_width + 2 * heads * head_dim + gate_up_width + intermediate) floats.
template <typename T>
static void decode_layers(T* x, int64_t batch, const int64_t* dims, const void* const* weights, const T* rope_cos,
                          const T* rope_sin, const int64_t* positions, const int64_t* slot_mapping,
                          const int64_t* context_slots, const int64_t* context_lens, float eps, float scale,
                          float* work) {
  const int64_t hidden = dims[HIDDEN], heads = dims[HEADS], kv_heads = dims[KV_HEADS], head_dim = dims[HEAD_DIM];
  const int64_t inter = dims[INTERMEDIATE], half = dims[ROTARY_HALF], qkv_width = dims[QKV_WIDTH];
  const int64_t gate_up_width = dims[GATE_UP_WIDTH], slots_total = dims[SLOTS_TOTAL], ld_slots = dims[LD_SLOTS];
  const int64_t group = heads / kv_heads, q_width = heads * head_dim;
  const int format = int(dims[WEIGHT_FORMAT]);
  const int64_t widest = std::max(std::max(hidden, q_width), inter);  // the most input features of a product
  // room for each thread's quantized copy of x (its k field: the room per thread, in codes)
  const int64_t per_thread = format == FORMAT_PANELS ? 0 : batch * widest, threads = omp_get_max_threads();
  const bool share = batch * kv_heads >= 2 * threads;
  std::vector<int8_t> codes(size_t(threads * per_thread));
  std::vector<float> code_scales(size_t(threads * per_thread / QGROUP));
  std::vector<int32_t> code_sums(code_scales.size());
  QuantizedRows quantized{codes.data(), code_scales.data(), code_sums.data(), per_thread};
  float* normed = work;
  T* qkv = (T*)(normed + batch * hidden);  // the T buffers take a float's room each, whatever T's size
  float* attn = (float*)qkv + batch * qkv_width;
  float* q = attn + batch * q_width;  // the rotated queries, widened for attention
  T* gate_up = (T*)(q + batch * q_width);
  float* act = (float*)gate_up + batch * gate_up_width;
  T* scratch = (T*)(act + batch * inter);
#pragma omp parallel
  for (int64_t layer = 0; layer < dims[LAYERS]; ++layer) {
    const void* const* w = weights + layer * WEIGHTS_PER_LAYER;
    T* k_cache = (T*)w[K_CACHE];
    T* v_cache = (T*)w[V_CACHE];
    rms_norm_rows_for(x, batch, hidden, (const T*)w[INPUT_NORM], eps, normed);
    product_for<false>(format, normed, batch, hidden, w[QKV], qkv_width, (const T*)w[QKV_BIAS], qkv, quantized);
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < heads + kv_heads; ++h) {  // q heads, then k heads: rotated; k and v cached
        T* row = qkv + b * qkv_width;
        const int64_t position = positions[b];
        rotate(row + h * head_dim, rope_cos + position * half, rope_sin + position * half, half);
        if (h < heads) {
          for (int64_t i = 0; i < head_dim; ++i) q[b * q_width + h * head_dim + i] = scalar(row[h * head_dim + i]);
        } else {
          const int64_t kv = h - heads, slot = slot_mapping[b];
          const T* k = row + h * head_dim;
          const T* v = row + (heads + kv_heads + kv) * head_dim;
          std::memcpy(k_cache + (kv * slots_total + slot) * head_dim, k, head_dim * sizeof(T));
          std::memcpy(v_cache + (kv * slots_total + slot) * head_dim, v, head_dim * sizeof(T));
        }
      }
    }
    // one (sequence, kv head) per item, its query heads sharing each widened key and value; with too few of those
    // to keep the threads busy (SmolLM2's 3 kv heads of one sequence on 2 threads), one query head per item
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t item = 0; item < (share ? kv_heads : heads); ++item) {
        const int64_t first = share ? item * group : item, kv = first / group;
        attend_kv_head(q + b * q_width + first * head_dim, share ? group : 1, head_dim,
                       k_cache + kv * slots_total * head_dim, v_cache + kv * slots_total * head_dim,
                       context_slots + b * ld_slots, context_lens[b], scale, attn + b * q_width + first * head_dim);
      }
    }
    residual_product_for(format, attn, batch, q_width, w[O], hidden, (const T*)w[O_BIAS], x, scratch, quantized);
    rms_norm_rows_for(x, batch, hidden, (const T*)w[POST_NORM], eps, normed);
    product_for<false>(format, normed, batch, hidden, w[GATE_UP], gate_up_width, (const T*)w[GATE_UP_BIAS], gate_up,
                       quantized);
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < inter; ++i) {
        const float g = scalar(gate_up[b * gate_up_width + i]);
        act[b * inter + i] = as<T>(as<T>(g / (1.f + std::exp(-g))) * scalar(gate_up[b * gate_up_width + inter + i]));
      }
    }
    residual_product_for(format, act, batch, inter, w[DOWN], hidden, (const T*)w[DOWN_BIAS], x, scratch, quantized);
  }
}

extern "C" void bringup_decode_layers(float* x, int64_t batch, const int64_t* dims, const void* const* weights,
                                      const float* rope_cos, const float* rope_sin, const int64_t* positions,
                                      const int64_t* slot_mapping, const int64_t* context_slots,
                                      const int64_t* context_lens, float eps, float scale, float* work) {
  decode_layers(x, batch, dims, weights, rope_cos, rope_sin, positions, slot_mapping, context_slots, context_lens,
                eps, scale, work);
}

extern "C" void bringup_decode_layers_bf16(bf16* x, int64_t batch, const int64_t* dims, const void* const* weights,
                                           const bf16* rope_cos, const bf16* rope_sin, const int64_t* positions,
                                           const int64_t* slot_mapping, const int64_t* context_slots,
                                           const int64_t* context_lens, float eps, float scale, float* work) {
  decode_layers(x, batch, dims, weights, rope_cos, rope_sin, positions, slot_mapping, context_slots, context_lens,
                eps, scale, work);
}
