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

#endif
