// The bfloat16 panel product on AMX tiles, for steps of more rows than the vdpbf16ps tiles hold in registers
// (included by panel_bf16.h where the compiler targets AMX-BF16; panel_rows_for calls amx_rows_for first).
//
// A bfloat16 panel is already an AMX B tile: 16 columns, each 64-byte row one pair of inputs (panel_bf16.h), so 32
// inputs of a panel are one tile of 16 rows. Up to ROW_TILES tiles of 16 input rows (bfloat16, 32 inputs each) are
// multiplied into as many float32 accumulator tiles per pass over a panel, so a panel streams from memory once for
// up to 48 rows where the vector tiles take it once per 12, and the multiplications keep up with the stream. TDPBF16PS adds each pair's two products in one step and
// treats bfloat16 subnormals as zero, as vdpbf16ps does; each column's sum is rounded to bfloat16 once, after the
// bias (and the residual, when accumulating). Linux grants a process the tile state only on request
// (arch_prctl(ARCH_REQ_XCOMP_PERM)); where it refuses, the vector tiles run instead.
#pragma once
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

static const int ROW_TILES = 3;  // accumulator tiles 0-2, input-row tiles 3-5, the panel's tile 6
static const int TILE_ROWS = 16;
static const int TILE_INPUTS = 32;  // bfloat16 inputs in a tile row (64 bytes)
// one row streams best through the vector tiles' grouped panels (1x576x3072: 96-116 against 107-133 us on a 2-core
// Xeon with AMX); from two rows the tiles win (2 to 16 rows: 109-133 us, where the vector tiles took 150-353)
static const int AMX_MIN_ROWS = 2;

static inline bool amx_granted() {
  static const bool granted = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
  return granted;
}

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

// this thread's tiles for a pass over `rows` (1 to ROW_TILES * 16) input rows
static inline void configure(int64_t rows) {
  TileConfig config;
  for (int t = 0; t < ROW_TILES; ++t) {
    const int64_t in_tile = rows - t * TILE_ROWS;
    const uint8_t n = uint8_t(in_tile <= 0 ? 0 : in_tile >= TILE_ROWS ? TILE_ROWS : in_tile);
    config.rows[t] = config.rows[ROW_TILES + t] = n;
    config.bytes_per_row[t] = config.bytes_per_row[ROW_TILES + t] = n ? 64 : 0;
  }
  config.rows[2 * ROW_TILES] = TILE_ROWS;
  config.bytes_per_row[2 * ROW_TILES] = 64;
  _tile_loadconfig(&config);
}

// whether amx_rows_for serves a product of m rows and k inputs here: enough rows, k a multiple of 32, the tile
// state granted
static inline bool amx_serves(int64_t m, int64_t k) { return m >= AMX_MIN_ROWS && k % TILE_INPUTS == 0 && amx_granted(); }

// y (+)= x W^T + b for m rows of bfloat16 x (row stride ldx), where amx_serves(m, k). Inside an OpenMP parallel
// region, as panel_rows_for.
template <bool ACCUMULATE>
static inline void amx_rows_for(const bf16* x, int64_t m, int64_t ldx, const bf16* panels, int64_t k, int64_t n,
                                const bf16* bias, bf16* y, int64_t ldy) {
  const int64_t num_panels = n / PANEL, per_pass = ROW_TILES * TILE_ROWS;
  alignas(64) float sums[ROW_TILES * TILE_ROWS * PANEL];
  for (int64_t first = 0; first < m; first += per_pass) {
    const int64_t rows = m - first < per_pass ? m - first : per_pass;
    const bf16* xs = x + first * ldx;
    configure(rows);
#pragma omp for schedule(static)
    for (int64_t p = 0; p < num_panels; ++p) {
      const bf16* panel = panels + p * k * PANEL;
      _tile_zero(0);  // a tile the pass configured no rows for must not be touched (#UD)
      if (rows > TILE_ROWS) _tile_zero(1);
      if (rows > 2 * TILE_ROWS) _tile_zero(2);
      // accumulator tile t += input-row tile 3 + t x the panel's tile 6, for each tile t the pass has rows in (the
      // intrinsics name their tiles by literal numbers)
      const int64_t stride = ldx * int64_t(sizeof(bf16)), tile_rows = TILE_ROWS * ldx, out = PANEL * sizeof(float);
      for (int64_t i = 0; i < k; i += TILE_INPUTS) {
        _tile_loadd(6, panel + i * PANEL, 64);  // inputs i..i+31: 16 pairs of 16 columns
        _tile_loadd(3, xs + i, stride);
        _tile_dpbf16ps(0, 3, 6);
        if (rows > TILE_ROWS) {
          _tile_loadd(4, xs + tile_rows + i, stride);
          _tile_dpbf16ps(1, 4, 6);
        }
        if (rows > 2 * TILE_ROWS) {
          _tile_loadd(5, xs + 2 * tile_rows + i, stride);
          _tile_dpbf16ps(2, 5, 6);
        }
      }
      _tile_stored(0, sums, out);
      if (rows > TILE_ROWS) _tile_stored(1, sums + TILE_ROWS * PANEL, out);
      if (rows > 2 * TILE_ROWS) _tile_stored(2, sums + 2 * TILE_ROWS * PANEL, out);
      const bf16* b = bias ? bias + p * PANEL : nullptr;
      for (int64_t r = 0; r < rows; ++r) {
        vec8 lo, hi;
        std::memcpy(&lo, sums + r * PANEL, sizeof lo);
        std::memcpy(&hi, sums + r * PANEL + 8, sizeof hi);
        finish16<ACCUMULATE>(lo, hi, b, y + (first + r) * ldy + p * PANEL);
      }
    }
    _tile_release();
  }
}

// The float32 rows x rounded to bfloat16 into one buffer the team shares (made by one thread, filled by all), for
// amx_rows_for; freed by release_rows after the product's barrier
static inline bf16* shared_rows(const float* x, int64_t m, int64_t ldx, int64_t k) {
  bf16* rows = nullptr;
#pragma omp single copyprivate(rows)
  rows = new bf16[size_t(m * k)];
#pragma omp for schedule(static)
  for (int64_t r = 0; r < m; ++r)
    for (int64_t i = 0; i < k; ++i) put(rows + r * k + i, x[r * ldx + i]);
  return rows;
}

static inline void release_rows(bf16* rows) {
#pragma omp barrier
#pragma omp single nowait
  delete[] rows;
}
