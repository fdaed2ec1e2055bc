// The bfloat16 panel product on AMX tiles, for steps of two rows or more (included by panel_tile.h where the
// compiler targets AMX-BF16; panel_rows_for calls amx_rows_for where amx_serves).
//
// A bfloat16 panel is already an AMX B tile: 16 columns, each 64-byte row one pair of inputs (panel_bf16.h), so 32
// inputs of a panel are one tile of 16 rows. Up to ROW_TILES tiles of 16 input rows (bfloat16, 32 inputs each) are
// multiplied into as many float32 accumulator tiles per pass over a panel, every pass over a panel while it is in
// cache, so the weights stream from memory once and the multiplications keep up with the stream (1x576x3072, 2-core
// Xeon: 2-16 rows 100-128 us, 64 rows 226 us against oneDNN's 278; from 96 rows oneDNN is faster). TDPBF16PS adds
// each pair's two products in one step and treats bfloat16 subnormals as zero, as vdpbf16ps does; each column's sum
// is rounded to bfloat16 once, after the bias (and the residual, when accumulating). Linux grants a process the tile state only on request
// (arch_prctl(ARCH_REQ_XCOMP_PERM)); where it refuses, the vector tiles run instead.
#pragma once
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

// accumulator tiles 0-3 (four independent sums keep the tile unit busy while each waits on its last product), input
// rows in tiles 4 and 6 by turns, the panel's 32 inputs in tile 5
static const int ROW_TILES = 4;
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

// this thread's tiles for a pass over `rows` (a multiple of 16, at most ROW_TILES * 16) input rows
static inline void configure(int64_t rows) {
  TileConfig config;
  for (int t = 0; t < ROW_TILES; ++t) {
    config.rows[t] = rows > t * TILE_ROWS ? TILE_ROWS : 0;
    config.bytes_per_row[t] = config.rows[t] ? 64 : 0;
  }
  for (int t : {4, 5, 6}) {
    config.rows[t] = TILE_ROWS;
    config.bytes_per_row[t] = 64;
  }
  _tile_loadconfig(&config);
}

// whether amx_rows_for serves a product of m rows and k inputs here: enough rows, k a multiple of 32, the tile
// state granted
static inline bool amx_serves(int64_t m, int64_t k) { return m >= AMX_MIN_ROWS && k % TILE_INPUTS == 0 && amx_granted(); }

// y[first.., panel p] (+)= x[first..] W_p^T + b_p over `rows` (whole tiles, at most ROW_TILES * 16) rows of x, the
// tiles configured for them, the first `written` of them written to y
template <bool ACCUMULATE>
static inline void amx_pass(const bf16* x, int64_t ldx, int64_t first, int64_t rows, int64_t written,
                            const bf16* panel, int64_t k, const bf16* bias, bf16* y, int64_t ldy, float* sums) {
  _tile_zero(0);  // a tile the pass configured no rows for must not be touched (#UD)
  if (rows > TILE_ROWS) _tile_zero(1);
  if (rows > 2 * TILE_ROWS) _tile_zero(2);
  if (rows > 3 * TILE_ROWS) _tile_zero(3);
  // accumulator tile t += 16 input rows (tile 4 or 6) x the panel's tile 5, for each tile t the pass has rows in (the
  // intrinsics name their tiles by literal numbers); x holds whole tiles of rows (shared_rows pads it with zeros)
  const int64_t stride = ldx * int64_t(sizeof(bf16)), out = PANEL * sizeof(float);
  const bf16* at[ROW_TILES];
  for (int t = 0; t < ROW_TILES; ++t) at[t] = x + (first + t * TILE_ROWS) * ldx;
  for (int64_t i = 0; i < k; i += TILE_INPUTS) {
    _tile_loadd(5, panel + i * PANEL, 64);  // inputs i..i+31: 16 pairs of 16 columns
    _tile_loadd(4, at[0] + i, stride);
    _tile_dpbf16ps(0, 4, 5);
    if (rows > TILE_ROWS) {
      _tile_loadd(6, at[1] + i, stride);
      _tile_dpbf16ps(1, 6, 5);
    }
    if (rows > 2 * TILE_ROWS) {
      _tile_loadd(4, at[2] + i, stride);
      _tile_dpbf16ps(2, 4, 5);
    }
    if (rows > 3 * TILE_ROWS) {
      _tile_loadd(6, at[3] + i, stride);
      _tile_dpbf16ps(3, 6, 5);
    }
  }
  _tile_stored(0, sums, out);
  if (rows > TILE_ROWS) _tile_stored(1, sums + TILE_ROWS * PANEL, out);
  if (rows > 2 * TILE_ROWS) _tile_stored(2, sums + 2 * TILE_ROWS * PANEL, out);
  if (rows > 3 * TILE_ROWS) _tile_stored(3, sums + 3 * TILE_ROWS * PANEL, out);
  for (int64_t r = 0; r < written; ++r) {
    vec8 lo, hi;
    std::memcpy(&lo, sums + r * PANEL, sizeof lo);
    std::memcpy(&hi, sums + r * PANEL + 8, sizeof hi);
    finish16<ACCUMULATE>(lo, hi, bias, y + (first + r) * ldy);
  }
}

static inline int64_t whole_tiles(int64_t m) { return (m + TILE_ROWS - 1) / TILE_ROWS * TILE_ROWS; }

// y (+)= x W^T + b for m rows of bfloat16 x (row stride ldx; rows up to whole_tiles(m) readable, those past m
// zero), where amx_serves(m, k). Inside an OpenMP parallel
// region, as panel_rows_for. Each thread takes whole panels and runs every pass of rows over one while it is in
// its cache, so the weights stream from memory once whatever m.
template <bool ACCUMULATE>
static inline void amx_rows_for(const bf16* x, int64_t m, int64_t ldx, const bf16* panels, int64_t k, int64_t n,
                                const bf16* bias, bf16* y, int64_t ldy) {
  const int64_t num_panels = n / PANEL, per_pass = ROW_TILES * TILE_ROWS, padded = whole_tiles(m);
  alignas(64) float sums[ROW_TILES * TILE_ROWS * PANEL];
  int64_t configured = 0;  // the rows this thread's tiles are configured for (0: none yet)
#pragma omp for schedule(static)
  for (int64_t p = 0; p < num_panels; ++p) {
    for (int64_t first = 0; first < padded; first += per_pass) {
      const int64_t rows = padded - first < per_pass ? padded - first : per_pass;
      if (rows != configured) {
        configure(rows);
        configured = rows;
      }
      amx_pass<ACCUMULATE>(x, ldx, first, rows, std::min(rows, m - first), panels + p * k * PANEL, k,
                           bias ? bias + p * PANEL : nullptr, y + p * PANEL, ldy, sums);
    }
  }
  if (configured) _tile_release();
}

// The float32 rows x rounded to bfloat16 into one buffer the team shares (made by one thread, filled by all), padded
// with zero rows to whole tiles, for amx_rows_for; freed by release_rows after the product's barrier
static inline bf16* shared_rows(const float* x, int64_t m, int64_t ldx, int64_t k) {
  bf16* rows = nullptr;
  const int64_t padded = whole_tiles(m);
#pragma omp single copyprivate(rows)
  rows = new bf16[size_t(padded * k)];
#pragma omp for schedule(static)
  for (int64_t r = 0; r < padded; ++r)
    for (int64_t i = 0; i < k; ++i) put(rows + r * k + i, r < m ? x[r * ldx + i] : 0.f);
  return rows;
}

static inline void release_rows(bf16* rows) {
#pragma omp barrier
#pragma omp single nowait
  delete[] rows;
}
