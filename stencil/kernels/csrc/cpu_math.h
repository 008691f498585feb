/* Scalar helpers shared by the C kernels, written so loops that call them vectorize: bfloat16
 * conversions, an exp without a libm call, a cache-line prefetch. Included by paged_attention.c,
 * layer_ops.c and panel_linear.c (stencil/paths.py build_library hashes this header with each
 * source, so a change rebuilds them all). */
#ifndef STENCIL_CPU_MATH_H
#define STENCIL_CPU_MATH_H

#include <math.h>
#include <stdint.h>

/* prefetcht0 of the line holding p, by inline asm: GCC deletes a loop that holds only
 * __builtin_prefetch. */
static inline __attribute__((always_inline)) void prefetch_line(const void *p) {
    __asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)p));
}

static inline float bf16_to_f32(uint16_t x) {
    union { uint32_t u; float f; } c;
    c.u = (uint32_t)x << 16;
    return c.f;
}

/* Round to nearest even, as torch's float -> bfloat16 conversion (NaN stays a quiet NaN). */
static inline uint16_t f32_to_bf16(float f) {
    union { float f; uint32_t u; } c;
    c.f = f;
    uint16_t rounded = (uint16_t)((c.u + 0x7fffu + ((c.u >> 16) & 1u)) >> 16);
    return f != f ? (uint16_t)0x7fc0 : rounded;
}

/* exp(x): x = n ln2 + r, |r| <= ln2 / 2, exp(r) by Cephes' degree-6 polynomial (relative error
 * < 2e-7), times 2^n built in the exponent bits. Below -87 it is 0 (so a -inf score gives 0),
 * above 88.72 +inf (as expf's overflow). */
static inline float exp_approx(float x) {
    float c = x < -87.f ? -87.f : (x > 88.f ? 88.f : x);
    float n = floorf(c * 1.44269504088896341f + 0.5f);
    float r = c - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.f;
    union { int32_t i; float f; } e;
    e.i = ((int32_t)n + 127) << 23;
    return x < -87.f ? 0.f : (x > 88.72f ? INFINITY : p * e.f);
}

#if defined(__AVX512F__)
#include <immintrin.h>

/* Lanes [0, n) of a row load (n < 16: the rest zero). */
static inline __mmask16 lanes(int n) {
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
}

/* exp_approx on 16 lanes (the same polynomial, in fused multiply-adds). */
static inline __m512 exp16(__m512 x) {
    __m512 c = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.f)), _mm512_set1_ps(88.f));
    __m512 n = _mm512_roundscale_ps(
        _mm512_fmadd_ps(c, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
        _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), c);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.f)));
    __m512i e = _mm512_slli_epi32(
        _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.f), _CMP_LT_OQ), y,
                             _mm512_setzero_ps());
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(88.72f), _CMP_GT_OQ), y,
                                _mm512_set1_ps(INFINITY));
}
#endif

#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

/* Lanes [0, n) of a row load (n < 8: the rest masked off). */
static inline __m256i lanes8(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n < 8 ? n : 8),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* exp_approx on 8 lanes (exp16's instructions on AVX2). */
static inline __m256 exp8(__m256 x) {
    __m256 c = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.f)), _mm256_set1_ps(88.f));
    __m256 n = _mm256_round_ps(
        _mm256_fmadd_ps(c, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)),
        _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), c);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.f)));
    __m256i e = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    y = _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-87.f), _CMP_LT_OQ), y);
    return _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY),
                            _mm256_cmp_ps(x, _mm256_set1_ps(88.72f), _CMP_GT_OQ));
}

/* The 8 lanes' sum in a fixed order. */
static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
#endif

/* x[i] = exp(x[i] - shift) for i < n; returns their sum, added as sum_row adds (so where the
 * exps past some index are all 0, it equals sum_row over the ones before). Every element takes
 * the same instructions wherever it lies in the row and whatever n is (a vectorized loop's
 * scalar tail rounds differently), so a value depends on its input only. */
static inline float exp_row(float *x, int n, float shift) {
#if defined(__AVX512F__)
    __m512 acc = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        __m512 v = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_set1_ps(shift));
        __m512 e = _mm512_maskz_mov_ps(m, exp16(v));
        _mm512_mask_storeu_ps(x + i, m, e);
        acc = _mm512_add_ps(acc, e);
    }
    return _mm512_reduce_add_ps(acc);
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) {
        __m256i m = lanes8(n - i);
        __m256 v = _mm256_sub_ps(_mm256_maskload_ps(x + i, m), _mm256_set1_ps(shift));
        __m256 e = _mm256_and_ps(exp8(v), _mm256_castsi256_ps(m));
        _mm256_maskstore_ps(x + i, m, e);
        acc = _mm256_add_ps(acc, e);
    }
    return hsum8(acc);
#else
    float s = 0.f;
    for (int i = 0; i < n; i++) s += x[i] = exp_approx(x[i] - shift);
    return s;
#endif
}

/* x[0] + ... + x[n - 1], in an order that depends on n only (not on where x lies in memory). */
static inline float sum_row(const float *x, int n) {
#if defined(__AVX512F__)
    __m512 acc = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(lanes(n - i), x + i));
    return _mm512_reduce_add_ps(acc);
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) acc = _mm256_add_ps(acc, _mm256_maskload_ps(x + i, lanes8(n - i)));
    return hsum8(acc);
#else
    float s = 0.f;
    for (int i = 0; i < n; i++) s += x[i];
    return s;
#endif
}

#endif
