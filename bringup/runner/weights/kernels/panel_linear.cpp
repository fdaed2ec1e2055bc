// y[m, n] = x[m, k] @ W^T + b for a few rows (decode steps), host memory, float32 or bfloat16 (panel_tile.h).
//
// Panels are split across OpenMP threads (the process's runtime, shared with torch), so a one-row product uses
// every core. bfloat16 inputs are widened once; a bfloat16 decode streams half the bytes of a float32 one.
// Built at run time with the host compiler (-O3 -march=native); see runner/weights/kernels/panels.py.
#include <vector>

#include "panel_tile.h"

template <typename T>
static void panel_linear(const float* x, int64_t m, int64_t ldx, const T* panels, int64_t k, int64_t n,
                         const T* bias, T* y, int64_t ldy) {
#pragma omp parallel
  panel_rows_for<false>(x, m, ldx, panels, k, n, bias, y, ldy);
}

extern "C" void bringup_panel_linear(const float* x, int64_t m, int64_t ldx, const float* panels, int64_t k,
                                     int64_t n, const float* bias, float* y, int64_t ldy) {
  panel_linear(x, m, ldx, panels, k, n, bias, y, ldy);
}

extern "C" void bringup_panel_linear_bf16(const bf16* x, int64_t m, int64_t ldx, const bf16* panels, int64_t k,
                                          int64_t n, const bf16* bias, bf16* y, int64_t ldy) {
  std::vector<float> wide(size_t(m * k));  // the few input rows widened once, not once per panel
  for (int64_t r = 0; r < m; ++r)
    for (int64_t i = 0; i < k; ++i) wide[r * k + i] = scalar(x[r * ldx + i]);
  panel_linear(wide.data(), m, k, panels, k, n, bias, y, ldy);
}
