// The element-wise parts of a prompt step's decoder layers, each one pass over the step's rows: the residual add
// with the RMSNorm after it, rotary embedding with the K/V write into the paged cache, and SiLU(gate) * up. The
// products between them stay with torch (oneDNN's GEMMs, AMX where the CPU has it), the attention with the plan's
// implementation; runner/host/prompt_layers.py strings them together.
//
// In eager torch a bfloat16 layer spends a third of a prompt step on some twenty element-wise ops, each widening
// its input to float32, rounding its output and writing it out. Here each value is rounded where the modules'
// bfloat16 ops round it (as<T>, panel_tile.h) and computed in float32 in between, as torch computes a bfloat16 op;
// sums run in another order than torch's, so a result may sit one bfloat16 step away (prompt_layers.py checks the
// layers against the modules before the plan uses them).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "lanes.h"

extern "C" int bringup_prompt_ops_abi(void) { return 1; }

// x [rows, n] += delta, rounded once (no add when delta is null); then out = RMSNorm(x) * weight: in bfloat16 the
// normalised row is rounded before the scale, as Llama's norm does
template <typename T>
static void add_rms_norm(T* x, const T* delta, int64_t rows, int64_t n, const T* weight, float eps, T* out) {
  const int64_t vectors = n - n % 16;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    T* row = x + r * n;
    const T* d = delta ? delta + r * n : nullptr;
    lanes sums{};
    float total = 0.f;
    for (int64_t i = 0; i < vectors; i += 16) {
      lanes v = load(row + i);
      if (d) {
        v = as_lanes<T>(v + load(d + i));
        store(row + i, v);
      }
      sums += v * v;
    }
    for (int64_t i = vectors; i < n; ++i) {
      if (d) put(row + i, scalar(row[i]) + scalar(d[i]));
      total += scalar(row[i]) * scalar(row[i]);
    }
    for (int l = 0; l < 16; ++l) total += sums[l];
    const float inv = 1.f / std::sqrt(total / float(n) + eps);
    T* o = out + r * n;
    for (int64_t i = 0; i < vectors; i += 16) store(o + i, as_lanes<T>(load(row + i) * inv) * load(weight + i));
    for (int64_t i = vectors; i < n; ++i) put(o + i, as<T>(scalar(row[i]) * inv) * scalar(weight[i]));
  }
}

// Each row of qkv [rows, ld] holds heads query heads, then kv_heads key heads and as many value heads, head_dim
// wide. The first 2 * half dims of every query and key head are rotated (rotate-half, by the row's position in the
// [positions, half] tables); each key and value head is copied into its cache plane [kv_heads, slots_total,
// head_dim] at the row's slot.
template <typename T>
static void rope_and_cache(T* qkv, int64_t rows, int64_t ld, int64_t heads, int64_t kv_heads, int64_t head_dim,
                           int64_t half, const T* cos, const T* sin, const int64_t* positions, const int64_t* slots,
                           T* k_cache, T* v_cache, int64_t slots_total) {
  const int64_t vectors = half - half % 16;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    T* row = qkv + r * ld;
    const T* c = cos + positions[r] * half;
    const T* s = sin + positions[r] * half;
    for (int64_t h = 0; h < heads + kv_heads; ++h) {
      T* head = row + h * head_dim;
      for (int64_t i = 0; i < vectors; i += 16) {
        const lanes x1 = load(head + i), x2 = load(head + half + i), ci = load(c + i), si = load(s + i);
        store(head + i, as_lanes<T>(x1 * ci) - as_lanes<T>(x2 * si));
        store(head + half + i, as_lanes<T>(x2 * ci) + as_lanes<T>(x1 * si));
      }
      for (int64_t i = vectors; i < half; ++i) {
        const float x1 = scalar(head[i]), x2 = scalar(head[i + half]), ci = scalar(c[i]), si = scalar(s[i]);
        put(head + i, as<T>(x1 * ci) - as<T>(x2 * si));
        put(head + i + half, as<T>(x2 * ci) + as<T>(x1 * si));
      }
    }
    for (int64_t kv = 0; kv < kv_heads; ++kv) {
      const int64_t at = (kv * slots_total + slots[r]) * head_dim;
      std::memcpy(k_cache + at, row + (heads + kv) * head_dim, size_t(head_dim) * sizeof(T));
      std::memcpy(v_cache + at, row + (heads + kv_heads + kv) * head_dim, size_t(head_dim) * sizeof(T));
    }
  }
}

// out [rows, inter] = SiLU(gate) * up, gate and up the two halves of each row of gate_up [rows, ld]
template <typename T>
static void silu_mul(const T* gate_up, int64_t rows, int64_t ld, int64_t inter, T* out) {
  const int64_t vectors = inter - inter % 16;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* g = gate_up + r * ld;
    T* o = out + r * inter;
    for (int64_t i = 0; i < vectors; i += 16) {
      const lanes gate = load(g + i);
      store(o + i, as_lanes<T>(gate / (1.f + exp_approx(-gate))) * load(g + inter + i));
    }
    for (int64_t i = vectors; i < inter; ++i) {
      const float gate = scalar(g[i]);
      put(o + i, as<T>(gate / (1.f + exp_approx(-gate))) * scalar(g[inter + i]));
    }
  }
}

#define PROMPT_OPS(SUFFIX, T)                                                                                         \
  extern "C" void bringup_add_rms_norm##SUFFIX(T* x, const T* delta, int64_t rows, int64_t n, const T* weight,      \
                                               float eps, T* out) {                                                 \
    add_rms_norm(x, delta, rows, n, weight, eps, out);                                                               \
  }                                                                                                                  \
  extern "C" void bringup_rope_and_cache##SUFFIX(T* qkv, int64_t rows, int64_t ld, int64_t heads, int64_t kv_heads, \
                                                 int64_t head_dim, int64_t half, const T* cos, const T* sin,         \
                                                 const int64_t* positions, const int64_t* slots, T* k_cache,         \
                                                 T* v_cache, int64_t slots_total) {                                  \
    rope_and_cache(qkv, rows, ld, heads, kv_heads, head_dim, half, cos, sin, positions, slots, k_cache, v_cache,     \
                   slots_total);                                                                                     \
  }                                                                                                                  \
  extern "C" void bringup_silu_mul##SUFFIX(const T* gate_up, int64_t rows, int64_t ld, int64_t inter, T* out) {     \
    silu_mul(gate_up, rows, ld, inter, out);                                                                         \
  }

PROMPT_OPS(, float)
PROMPT_OPS(_bf16, bf16)
