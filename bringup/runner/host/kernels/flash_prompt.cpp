// Causal attention for prompts in bfloat16 on AMX tiles, reading keys and values from the paged cache by slot:
// each query row t of a prompt attends to keys 0 .. t + offset of its sequence (offset = the tokens cached before
// the prompt), so a prompt behind a cached context and a fresh one are one call, with no mask, no gather and no
// repeated kv heads. runner/host/flash_prompt.py calls it and checks it against float64 before the plan uses it.
//
// Per kv head the keys are packed once per call as AMX B tiles (pairs of head dims, 16 keys a tile) and the values
// as B tiles of key pairs; each unit of work is 16 query rows of one query head, which stream over blocks of BLOCK
// keys: scores = Q K^T on the tiles (float32 sums), an online softmax in float32 vectors (the block's probabilities
// rounded to bfloat16, as every flash kernel feeds its second product), then P V on the tiles, added into the rows'
// float32 outputs rescaled by the change of their running maximum. Each output is rounded to bfloat16 once, after
// the division by its row's sum. Blocks wholly above a row tile's diagonal are skipped.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "lanes.h"

extern "C" int bringup_flash_prompt_abi(void) { return 1; }

#if defined(__AMX_BF16__) && defined(__AVX512BF16__) && !defined(BRINGUP_NO_AMX)
static const int64_t BLOCK = 64;     // keys a block: four accumulator tiles of 16
static const int64_t ROWS = 16;      // query rows a unit (one tile)
static const int64_t MAX_DIM = 256;  // head dims, a multiple of 64
static const int64_t MAX_LANES = 16;  // query heads a kv head (x row tiles) one unit interleaves

extern "C" int bringup_flash_prompt_available(void) { return amx_granted() ? 1 : 0; }

// all eight tiles 16 rows of 64 bytes: 0-3 float32 sums, 4-5 query rows or probabilities, 6-7 keys or values
static inline void configure_all() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = 16;
    config.bytes_per_row[t] = 64;
  }
  _tile_loadconfig(&config);
}

// packed keys: for kv head h, tile of 16 keys kt, dims 32c..32c+31, a [16 dim pairs][16 keys] tile of (bfloat16 x 2)
static inline const uint32_t* key_tile(const uint32_t* keys, int64_t tiles, int64_t chunks, int64_t h, int64_t kt,
                                       int64_t c) {
  return keys + ((h * tiles + kt) * chunks + c) * 256;
}

// packed values: for kv head h, keys 32j..32j+31, dims 16d..16d+15, a [16 key pairs][16 dims] tile of (bfloat16 x 2)
static inline const uint32_t* value_tile(const uint32_t* values, int64_t pairs, int64_t dim_tiles, int64_t h,
                                         int64_t j, int64_t d) {
  return values + ((h * pairs + j) * dim_tiles + d) * 256;
}

static void pack(const bf16* k_cache, const bf16* v_cache, int64_t slots_total, const int64_t* slots, int64_t keys,
                 int64_t padded, int64_t kv_heads, int64_t dim, uint32_t* k_packed, uint32_t* v_packed) {
  const int64_t tiles = padded / 16, chunks = dim / 32, pairs = padded / 32, dim_tiles = dim / 16;
#pragma omp for collapse(2) schedule(static)
  for (int64_t h = 0; h < kv_heads; ++h) {
    for (int64_t kt = 0; kt < tiles; ++kt) {
      for (int64_t n = 0; n < 16; ++n) {  // keys: each key's dim pairs down a column
        const int64_t key = kt * 16 + n;
        const bf16* row = key < keys ? k_cache + (h * slots_total + slots[key]) * dim : nullptr;
        for (int64_t c = 0; c < chunks; ++c) {
          uint32_t* tile = const_cast<uint32_t*>(key_tile(k_packed, tiles, chunks, h, kt, c));
          for (int64_t p = 0; p < 16; ++p) {
            uint32_t pair = 0;
            if (row) std::memcpy(&pair, row + c * 32 + 2 * p, 4);
            tile[p * 16 + n] = pair;
          }
        }
      }
      if (kt % 2) continue;  // values: one pass per 32 keys (two key tiles)
      const int64_t j = kt / 2;
      for (int64_t p = 0; p < 16; ++p) {
        const int64_t first = j * 32 + 2 * p;
        const bf16* a = first < keys ? v_cache + (h * slots_total + slots[first]) * dim : nullptr;
        const bf16* b = first + 1 < keys ? v_cache + (h * slots_total + slots[first + 1]) * dim : nullptr;
        for (int64_t d = 0; d < dim_tiles; ++d) {
          uint32_t* tile = const_cast<uint32_t*>(value_tile(v_packed, pairs, dim_tiles, h, j, d));
          for (int64_t n = 0; n < 16; ++n) {
            const uint32_t lo = a ? a[d * 16 + n] : 0, hi = b ? b[d * 16 + n] : 0;
            tile[p * 16 + n] = lo | (hi << 16);
          }
        }
      }
    }
  }
}

struct Prompt {
  const bf16* q;  // query row t, head h at q[t * q_row + h * dim]
  int64_t q_row, rows, heads, kv_heads, dim, keys, padded, offset;  // offset < 0: every key visible to every row
  float scale;
  bf16* out;  // out[t * out_row + h * dim]
  int64_t out_row;
};

// the four accumulator tiles: zeroed, and stored to rows of `stride` bytes, 16 columns apart
static inline void zero_sums() {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
}

static inline void store_sums(float* at, int64_t stride) {
  _tile_stored(0, at, stride);
  _tile_stored(1, at + 16, stride);
  _tile_stored(2, at + 32, stride);
  _tile_stored(3, at + 48, stride);
}

// accumulator tile t += input tile A x the B tile at b_t, for t = 0..3 (a macro: the intrinsics take literal tile
// numbers); tiles are not renamed, so the B loads alternate 6 and 7 (and callers alternate A between 4 and 5) and no
// load waits for the product before it
#define FOUR_PRODUCTS(A, b0, b1, b2, b3) \
  do {                                   \
    _tile_loadd(6, b0, 64);              \
    _tile_dpbf16ps(0, A, 6);             \
    _tile_loadd(7, b1, 64);              \
    _tile_dpbf16ps(1, A, 7);             \
    _tile_loadd(6, b2, 64);              \
    _tile_dpbf16ps(2, A, 6);             \
    _tile_loadd(7, b3, 64);              \
    _tile_dpbf16ps(3, A, 7);             \
  } while (0)

// the scores of a block of keys for the tile of query rows (queries: 16 rows of dim bfloat16), into scores [16][64]
static inline void block_scores(const bf16* queries, int64_t dim, const uint32_t* k_packed, int64_t tiles,
                                int64_t h, int64_t first_tile, float* scores) {
  const int64_t chunks = dim / 32;
  zero_sums();
  for (int64_t c = 0; c < chunks; c += 2) {
    _tile_loadd(4, queries + c * 32, dim * 2);
    FOUR_PRODUCTS(4, key_tile(k_packed, tiles, chunks, h, first_tile, c),
                     key_tile(k_packed, tiles, chunks, h, first_tile + 1, c),
                     key_tile(k_packed, tiles, chunks, h, first_tile + 2, c),
                     key_tile(k_packed, tiles, chunks, h, first_tile + 3, c));
    _tile_loadd(5, queries + (c + 1) * 32, dim * 2);
    FOUR_PRODUCTS(5, key_tile(k_packed, tiles, chunks, h, first_tile, c + 1),
                     key_tile(k_packed, tiles, chunks, h, first_tile + 1, c + 1),
                     key_tile(k_packed, tiles, chunks, h, first_tile + 2, c + 1),
                     key_tile(k_packed, tiles, chunks, h, first_tile + 3, c + 1));
  }
  store_sums(scores, BLOCK * 4);
}

// sums [16][dim] = probabilities [16][64 keys] V over the block's keys
static inline void block_values(const bf16* probabilities, const uint32_t* v_packed, int64_t pairs, int64_t dim,
                                int64_t h, int64_t first_pair, float* sums) {
  const int64_t dim_tiles = dim / 16;
  for (int64_t d = 0; d < dim_tiles; d += 4) {
    zero_sums();
    _tile_loadd(4, probabilities, BLOCK * 2);
    FOUR_PRODUCTS(4, value_tile(v_packed, pairs, dim_tiles, h, first_pair, d),
                     value_tile(v_packed, pairs, dim_tiles, h, first_pair, d + 1),
                     value_tile(v_packed, pairs, dim_tiles, h, first_pair, d + 2),
                     value_tile(v_packed, pairs, dim_tiles, h, first_pair, d + 3));
    _tile_loadd(5, probabilities + 32, BLOCK * 2);
    FOUR_PRODUCTS(5, value_tile(v_packed, pairs, dim_tiles, h, first_pair + 1, d),
                     value_tile(v_packed, pairs, dim_tiles, h, first_pair + 1, d + 1),
                     value_tile(v_packed, pairs, dim_tiles, h, first_pair + 1, d + 2),
                     value_tile(v_packed, pairs, dim_tiles, h, first_pair + 1, d + 3));
    store_sums(sums + d * 16, dim * 4);
  }
}

// 16 query rows of one head: their queries, and their scores, probabilities, products and outputs so far
struct Lane {
  int64_t head, first_row, rows, last_key;  // last_key: one past the last key any of its rows sees
  bf16* queries;   // [16][dim], rows past `rows` zero
  float* scores;   // [16][BLOCK]
  bf16* probs;     // [16][BLOCK]
  float* sums;     // [16][dim]: the block's P V, added into acc one phase later
  float* acc;      // [16][dim]
  alignas(64) float top[ROWS];  // each row's largest scaled score so far, in log2 units
  alignas(64) float total[ROWS];  // each row's sum of probabilities so far, relative to top
  bool pending;    // sums hold a block not yet added
};

static inline void start_lane(Lane& lane, const Prompt& p, int64_t head, int64_t first_row) {
  lane.head = head;
  lane.first_row = first_row;
  lane.rows = std::min(ROWS, p.rows - first_row);
  lane.last_key = p.offset < 0 ? p.keys : std::min(p.keys, first_row + lane.rows + p.offset);
  lane.pending = false;
  std::memset(lane.queries + lane.rows * p.dim, 0, (ROWS - lane.rows) * p.dim * 2);
  std::memset(lane.acc, 0, ROWS * p.dim * 4);
  for (int64_t r = 0; r < ROWS; ++r) {
    lane.top[r] = -INFINITY;
    lane.total[r] = 0.f;
    if (r < lane.rows) std::memcpy(lane.queries + r * p.dim, p.q + (first_row + r) * p.q_row + head * p.dim, p.dim * 2);
  }
}

static inline void add_pending(Lane& lane, int64_t dim) {
  if (!lane.pending) return;
  for (int64_t r = 0; r < lane.rows; ++r)
    for (int64_t d = 0; d < dim; d += 16)
      store(lane.acc + r * dim + d, load(lane.acc + r * dim + d) + load(lane.sums + r * dim + d));
  lane.pending = false;
}

// 2^x for x <= 0 in float32 (Cephes' exp2f: 2^n times a degree-6 polynomial on [-1/2, 1/2], within 2 ulp); below
// -126 it gives 2^-126 or less, so callers zero what they mask
static inline __m512 exp2_nonpositive(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-126.f));
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(1.535336188319500e-4f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.339887440266574e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618437357674640e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550332471162809e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402264791363012e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931472028550421e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.f));
  return _mm512_scalef_ps(p, n);
}

// which of the 16 keys from `first` of a block a row seeing `visible` keys of it sees
static inline __mmask16 seen(int64_t visible, int64_t first) {
  const int64_t count = std::clamp<int64_t>(visible - first, 0, 16);
  return count == 16 ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1u);
}

// The block's probabilities from its scores, the running maxima and sums updated, acc rescaled to the new maxima.
// Maxima are kept in units of log2: top = scale * log2(e) * the largest score, so each probability is one FMA and
// 2^x away; the rows' maxima and rescales are one vector of 16 rows.
static inline void block_softmax(Lane& lane, const Prompt& p, int64_t block) {
  const float to_log2 = p.scale * 1.44269504088896341f;
  alignas(64) float peaks[ROWS], sums[ROWS] = {};
  int64_t visible[ROWS];
  for (int64_t r = 0; r < ROWS; ++r) {
    const int64_t sees = p.offset < 0 ? p.keys : std::min(p.keys, lane.first_row + r + p.offset + 1);
    visible[r] = r < lane.rows ? std::min(BLOCK, sees - block) : 0;  // keys of the block the row sees
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < BLOCK / 16; ++i)
      m = _mm512_mask_max_ps(m, seen(visible[r], i * 16), m, _mm512_load_ps(lane.scores + r * BLOCK + i * 16));
    peaks[r] = _mm512_reduce_max_ps(m) * to_log2;
  }
  const __m512 old_top = _mm512_load_ps(lane.top);
  const __m512 top = _mm512_max_ps(old_top, _mm512_load_ps(peaks));
  const __mmask16 started = _mm512_cmp_ps_mask(top, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
  // 0 where a row sees its first keys (its acc and sum are 0), 1 where it has seen none yet
  const __m512 rescale = _mm512_mask_mov_ps(_mm512_set1_ps(1.f), started,
                                            exp2_nonpositive(_mm512_sub_ps(old_top, top)));
  _mm512_store_ps(lane.top, top);
  for (int64_t r = 0; r < ROWS; ++r) {
    bf16* probs = lane.probs + r * BLOCK;
    if (visible[r] <= 0) {
      std::memset(probs, 0, BLOCK * 2);
      continue;
    }
    const __m512 shift = _mm512_set1_ps(-lane.top[r]), factor = _mm512_set1_ps(to_log2);
    __m512 added = _mm512_setzero_ps();
    for (int64_t i = 0; i < BLOCK / 16; ++i) {
      const __m512 x = _mm512_fmadd_ps(_mm512_load_ps(lane.scores + r * BLOCK + i * 16), factor, shift);
      const __m512 e = _mm512_maskz_mov_ps(seen(visible[r], i * 16), exp2_nonpositive(x));
      added = _mm512_add_ps(added, e);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(probs + i * 16), (__m256i)_mm512_cvtneps_pbh(e));
    }
    sums[r] = _mm512_reduce_add_ps(added);
  }
  _mm512_store_ps(lane.total, _mm512_fmadd_ps(_mm512_load_ps(lane.total), rescale, _mm512_load_ps(sums)));
  alignas(64) float factors[ROWS];
  _mm512_store_ps(factors, rescale);
  for (int64_t r = 0; r < lane.rows; ++r) {
    if (factors[r] == 1.f) continue;
    const __m512 f = _mm512_set1_ps(factors[r]);
    for (int64_t d = 0; d < p.dim; d += 16)
      _mm512_store_ps(lane.acc + r * p.dim + d, _mm512_mul_ps(_mm512_load_ps(lane.acc + r * p.dim + d), f));
  }
}

static inline void finish_lane(Lane& lane, const Prompt& p) {
  add_pending(lane, p.dim);
  for (int64_t r = 0; r < lane.rows; ++r) {
    const lanes inverse = lanes{} + 1.f / lane.total[r];
    bf16* o = p.out + (lane.first_row + r) * p.out_row + lane.head * p.dim;
    for (int64_t d = 0; d < p.dim; d += 16) store(o + d, load(lane.acc + r * p.dim + d) * inverse);
  }
}

// The lanes of one kv head, block by block in phases -- every lane's scores, then every lane's softmax, then every
// lane's P V -- so a tile never loads what vector stores wrote a moment before (AMX loads do not forward from
// stores: a lane alone stalled its P V on its probabilities for a fifth of the time).
static void attend_lanes(Lane* lanes_, int64_t count, const Prompt& p, const uint32_t* k_packed,
                         const uint32_t* v_packed, int64_t kh) {
  const int64_t tiles = p.padded / 16, pairs = p.padded / 32;
  int64_t last_key = 0;
  for (int64_t i = 0; i < count; ++i) last_key = std::max(last_key, lanes_[i].last_key);
  for (int64_t block = 0; block < last_key; block += BLOCK) {
    Lane* active[MAX_LANES];
    int64_t n = 0;
    for (int64_t i = 0; i < count; ++i)
      if (block < lanes_[i].last_key) active[n++] = &lanes_[i];
    // a software pipeline: lane i's softmax between lane i+1's scores and lane i-1's P V, so the tile unit and the
    // vector units work at once, and no tile or vector load waits on what the other just stored
    block_scores(active[0]->queries, p.dim, k_packed, tiles, kh, block / 16, active[0]->scores);
    for (int64_t i = 0; i < n; ++i) {
      if (i + 1 < n)
        block_scores(active[i + 1]->queries, p.dim, k_packed, tiles, kh, block / 16, active[i + 1]->scores);
      add_pending(*active[i], p.dim);
      block_softmax(*active[i], p, block);
      if (i > 0) {
        block_values(active[i - 1]->probs, v_packed, pairs, p.dim, kh, block / 32, active[i - 1]->sums);
        active[i - 1]->pending = true;
      }
    }
    block_values(active[n - 1]->probs, v_packed, pairs, p.dim, kh, block / 32, active[n - 1]->sums);
    active[n - 1]->pending = true;
  }
  for (int64_t i = 0; i < count; ++i) finish_lane(lanes_[i], p);
}

// 0: done; 1: not served here (tile state refused, or a shape the kernel does not take); nothing written then
extern "C" int bringup_flash_prompt_bf16(const bf16* q, int64_t q_row, int64_t rows, int64_t heads, int64_t kv_heads,
                                         int64_t dim, const bf16* k_cache, const bf16* v_cache, int64_t slots_total,
                                         const int64_t* slots, int64_t keys, int64_t offset, float scale, bf16* out,
                                         int64_t out_row) {
  if (!amx_granted() || dim % 64 || dim > MAX_DIM || kv_heads <= 0 || heads % kv_heads ||
      heads / kv_heads > MAX_LANES || rows <= 0 || keys <= 0 || !(scale > 0.f) ||
      (offset >= 0 && rows + offset > keys))
    return 1;
  const int64_t padded = (keys + BLOCK - 1) / BLOCK * BLOCK;
  const size_t words = size_t(kv_heads * padded * dim / 2);
  const int64_t group = heads / kv_heads, row_tiles = (rows + ROWS - 1) / ROWS;
  // a unit: one kv head's query heads over one or (a group of one) two row tiles -- at least two lanes to interleave
  const int64_t tiles_a_unit = group >= 2 ? 1 : 2, units_a_head = (row_tiles + tiles_a_unit - 1) / tiles_a_unit;
  const int64_t lanes_a_unit = group * tiles_a_unit;
  const size_t lane_bytes = size_t(ROWS * dim * 2 + ROWS * BLOCK * 4 + ROWS * BLOCK * 2 + 2 * ROWS * dim * 4);
  uint32_t* k_packed = static_cast<uint32_t*>(std::aligned_alloc(64, words * 4));
  uint32_t* v_packed = static_cast<uint32_t*>(std::aligned_alloc(64, words * 4));
  if (!k_packed || !v_packed) {
    std::free(k_packed);
    std::free(v_packed);
    return 1;
  }
  const Prompt p{q, q_row, rows, heads, kv_heads, dim, keys, padded, offset, scale, out, out_row};
#pragma omp parallel
  {
    pack(k_cache, v_cache, slots_total, slots, keys, padded, kv_heads, dim, k_packed, v_packed);  // ends in a barrier
    char* scratch = static_cast<char*>(std::aligned_alloc(64, lane_bytes * lanes_a_unit));
    Lane* lanes_ = new Lane[lanes_a_unit];
    for (int64_t i = 0; i < lanes_a_unit; ++i) {
      char* at = scratch + i * lane_bytes;
      lanes_[i].queries = reinterpret_cast<bf16*>(at);
      lanes_[i].scores = reinterpret_cast<float*>(at + ROWS * dim * 2);
      lanes_[i].probs = reinterpret_cast<bf16*>(at + ROWS * dim * 2 + ROWS * BLOCK * 4);
      lanes_[i].sums = reinterpret_cast<float*>(at + ROWS * dim * 2 + ROWS * BLOCK * 6);
      lanes_[i].acc = lanes_[i].sums + ROWS * dim;
    }
    configure_all();
#pragma omp for schedule(dynamic, 1)
    for (int64_t unit = 0; unit < kv_heads * units_a_head; ++unit) {
      const int64_t kh = unit % kv_heads;
      const int64_t first_tile = (units_a_head - 1 - unit / kv_heads) * tiles_a_unit;  // the longest rows first
      int64_t count = 0;
      for (int64_t t = first_tile; t < std::min(row_tiles, first_tile + tiles_a_unit); ++t)
        for (int64_t g = 0; g < group; ++g) start_lane(lanes_[count++], p, kh * group + g, t * ROWS);
      attend_lanes(lanes_, count, p, k_packed, v_packed, kh);
    }
    _tile_release();
    delete[] lanes_;
    std::free(scratch);
  }
  std::free(k_packed);
  std::free(v_packed);
  return 0;
}
#else
extern "C" int bringup_flash_prompt_available(void) { return 0; }
extern "C" int bringup_flash_prompt_bf16(const bf16*, int64_t, int64_t, int64_t, int64_t, int64_t, const bf16*,
                                         const bf16*, int64_t, const int64_t*, int64_t, int64_t, float, bf16*,
                                         int64_t) {
  return 1;
}
#endif
