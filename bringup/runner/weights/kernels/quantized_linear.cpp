// y[m, n] = x[m, k] @ W^T + b for a few rows (decode steps), W stored int8 or int4 in blocks of 32, rows in tiles of
// 16 (the layouts of runner/weights/formats/integer.py), x, b and y float32: x's rows quantized per block of
// 32, then integer dot products per block (quantized_tile.h). Output rows are split across OpenMP threads (torch's runtime), so a
// one-row product streams weights on every core. Built at run time with -O3 -march=native; see kernels/quantized.py.
#include <vector>

#include "quantized_tile.h"

static void quantized_linear(int format, const float* x, int64_t m, int64_t ldx, const uint8_t* w, int64_t k,
                             int64_t n, const float* bias, float* y, int64_t ldy) {
  std::vector<int8_t> codes(size_t(m * k));
  std::vector<float> scales(size_t(m * k / QGROUP));
  std::vector<int32_t> sums(scales.size());
  QuantizedRows a{codes.data(), scales.data(), sums.data(), k};
#pragma omp parallel
  {
    quantize_rows_for(x, m, ldx, a);
    quantized_product_for<false>(format, a, m, w, n, bias, y, ldy);
  }
}

// the widest registers the products were built for: 512, 256, or 0 (plain C)
extern "C" int bringup_quantized_vector_bits(void) {
#if defined(QUANTIZED_512)
  return 512;
#elif defined(QUANTIZED_256)
  return 256;
#else
  return 0;
#endif
}

// y = x @ W^T + b with W stored in the kernel format `format` (formats/integer.py's KERNEL_FORMATS: int8, each int4)
extern "C" void bringup_quantized_linear(int64_t format, const float* x, int64_t m, int64_t ldx, const uint8_t* w,
                                         int64_t k, int64_t n, const float* bias, float* y, int64_t ldy) {
  quantized_linear(int(format), x, m, ldx, w, k, n, bias, y, ldy);
}
