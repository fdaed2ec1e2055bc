// y[m, n] = x[m, k] @ W^T + b for a few rows (decode steps), float32, host memory.
//
// W is stored as panels of 16 output columns, each panel [k][16] contiguous, so one pass over a panel
// streams 64 bytes per input element and feeds up to six rows from registers; the panel is prefetched
// 2 KiB ahead, non-temporally (read once per step: it should not evict what the rest of the step uses). Panels are split across
// OpenMP threads (the process's runtime, shared with torch), so a one-row product uses every core.
// Built at run time with the host compiler (-O3 -march=native); see bringup/runner/panel_kernel.py.
#include <cstdint>
#include <cstring>

typedef float vec8 __attribute__((vector_size(32)));
static const int64_t PANEL = 16;
static const int MAX_ROWS = 6;
static const int64_t PREFETCH_AHEAD = 32;  // input elements (x 64 bytes); a hint, harmless past the end

template <int ROWS>
static inline void tile(const float* x, int64_t ldx, const float* panel, int64_t k, float* y, int64_t ldy,
                        const float* bias) {
  vec8 acc[ROWS][2];
  for (int r = 0; r < ROWS; ++r) acc[r][0] = acc[r][1] = vec8{};
  for (int64_t i = 0; i < k; ++i) {
    __builtin_prefetch(panel + (i + PREFETCH_AHEAD) * PANEL, 0, 0);
    vec8 w0, w1;
    std::memcpy(&w0, panel + i * PANEL, sizeof w0);
    std::memcpy(&w1, panel + i * PANEL + 8, sizeof w1);
    for (int r = 0; r < ROWS; ++r) {
      const float xv = x[r * ldx + i];
      acc[r][0] += xv * w0;
      acc[r][1] += xv * w1;
    }
  }
  vec8 b0 = vec8{}, b1 = vec8{};
  if (bias) {
    std::memcpy(&b0, bias, sizeof b0);
    std::memcpy(&b1, bias + 8, sizeof b1);
  }
  for (int r = 0; r < ROWS; ++r) {
    const vec8 o0 = acc[r][0] + b0, o1 = acc[r][1] + b1;
    std::memcpy(y + r * ldy, &o0, sizeof o0);
    std::memcpy(y + r * ldy + 8, &o1, sizeof o1);
  }
}

extern "C" int bringup_panel_width(void) { return PANEL; }

// n must be a multiple of PANEL; x rows have stride ldx, y rows ldy; bias may be null.
extern "C" void bringup_panel_linear(const float* x, int64_t m, int64_t ldx, const float* panels, int64_t k,
                                     int64_t n, const float* bias, float* y, int64_t ldy) {
  const int64_t num_panels = n / PANEL;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < num_panels; ++p) {
    const float* panel = panels + p * k * PANEL;
    const float* b = bias ? bias + p * PANEL : nullptr;
    float* out = y + p * PANEL;
    int64_t r = 0;
    for (; r + MAX_ROWS <= m; r += MAX_ROWS) tile<MAX_ROWS>(x + r * ldx, ldx, panel, k, out + r * ldy, ldy, b);
    switch (m - r) {
      case 5: tile<5>(x + r * ldx, ldx, panel, k, out + r * ldy, ldy, b); break;
      case 4: tile<4>(x + r * ldx, ldx, panel, k, out + r * ldy, ldy, b); break;
      case 3: tile<3>(x + r * ldx, ldx, panel, k, out + r * ldy, ldy, b); break;
      case 2: tile<2>(x + r * ldx, ldx, panel, k, out + r * ldy, ldy, b); break;
      case 1: tile<1>(x + r * ldx, ldx, panel, k, out + r * ldy, ldy, b); break;
      default: break;
    }
  }
}
