/* The 16 scales (or mins) of group g of strip s, in quant_weight.py's layout, for
 * csrc/quant_linear.c and csrc/quant_linear_i8.c: fp16 [S][K/G][16], or, where sup (the K-quants'
 * super-block scales, fp16 [S][K/256][16]) is given, int8 [S][K/G][16] each times its super-block
 * scale: the file's own values, the product exact in fp32 (an fp16 times an int8). */
#ifndef QUANT_SCALES_H
#define QUANT_SCALES_H
#include <immintrin.h>
#include <stdint.h>

#define SUPER 256 /* weights per super-block scale */

static inline __m512 group_scales(const void *v, const uint16_t *sup, int K, int G, int64_t s,
                                  int g) {
    const int64_t off = (s * (K / G) + g) * 16;
    if (!sup)
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)v + off)));
    const __m128i sub = _mm_loadu_si128((const __m128i *)((const int8_t *)v + off));
    const int64_t super_off = (s * (K / SUPER) + (int64_t)g * G / SUPER) * 16;
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sub)),
                         _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sup + super_off))));
}
#endif
