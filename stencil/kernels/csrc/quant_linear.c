/* Weight-only quantized linear for CPU: out[M, N] = x[M, K] @ W[N, K]^T (+ bias), where W is kept
 * in the packed low-bit layout of stencil/kernels/quant_weight.py and never materialised.
 *
 *   value(n, k) = (code(n, k) - zero) * scale(n, k / G) + min(n, k / G)
 *
 * For each strip of 16 output channels and chunk of 256 k, the codes are expanded once into an L1
 * buffer of bf16 *integers* (exact: |code| <= 255), then every row of x (rounded to bf16 once by
 * the caller) is dotted against it with vdpbf16ps (fp32 accumulation). Scales and mins are applied
 * per group in fp32: acc += scale * sum(x * code) + min * sum(x), so the weights are exact and the
 * only rounding beyond fp32 is that of x to bf16.
 *
 * Packed layout (S = N / 16 strips, vector v = k pair (2v, 2v+1) of the strip's 16 channels, its
 * 32 elements lane-major: element 2n + e = channel n, k = 2v + e):
 *   bits == 8:  int8 codes   [S][K/2][32]
 *   bits 4..6:  uint8 nibbles [S][K/4][32] (byte i: low nibble = element i of vector 2j, high = 2j+1)
 *               the bits above 4 in quads of k (quant_weight.py's _high_bits): byte 4n + e of
 *               quad q = channel n, k = 4q + e, at bit (q % P) * (bits - 4) of byte 4n + e of
 *               64-byte vector q / P, P = 8 / (bits - 4)
 *   scales, mins: fp16 [S][K/G][16]; table: bf16 of (code - zero) for code 0..63.
 * Built with -march=native by stencil/kernels/cpu_quant.py; qlinear_available() is 0 where the
 * CPU lacks AVX512-BF16 (the caller then uses the pure-torch reference).
 */
#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512BF16__) && defined(__BMI2__)
#include <immintrin.h>
#define HAVE_KERNEL 1
#endif

#define CHUNK_V 128 /* pair vectors per converted chunk (256 k) */
#define ROW_TILE 64 /* rows per accumulator tile */

int qlinear_available(void) {
#ifdef HAVE_KERNEL
    return 1;
#else
    return 0;
#endif
}

#ifdef HAVE_KERNEL
#include "quant_scales.h"

typedef struct {
    int K, bits, G, has_min;
    const int8_t *codes8;
    const uint8_t *nibbles;
    const uint32_t *planes;
    const void *scales, *mins;    /* fp16, or int8 with super-block scales (quant_scales.h) */
    const uint16_t *sup_s, *sup_m; /* the super-block scales and mins, or NULL */
    __m512i tlo, thi;
} QW;

/* Expand vectors [v0, v0 + nv) of strip s into bf16 integers. */
static void expand(const QW *w, int64_t s, int v0, int nv, __m512i *buf) {
    const int64_t half = w->K / 2;
    if (w->bits == 8) {
        const int8_t *src = w->codes8 + (s * half + v0) * 32;
        for (int v = 0; v < nv; v++) {
            __m256i b = _mm256_loadu_si256((const __m256i *)(src + 32 * v));
            __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(b)));
            __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(b, 1)));
            buf[v] = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
        }
        return;
    }
    const int np = w->bits - 4, per = np ? 8 / np : 1;
    const uint8_t *src = w->nibbles + (s * (w->K / 4) + v0 / 2) * 32;
    const uint8_t *hi = (const uint8_t *)w->planes + (s * (w->K / 4) + v0 / 2) * 8 * np;
    const __m512i low = _mm512_set1_epi16(15);
    for (int j = 0; j < nv / 2; j++) {
        __m512i b = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(src + 32 * j)));
        __m512i c0 = _mm512_and_si512(b, low), c1 = _mm512_srli_epi16(b, 4);
        if (np) { /* quad j's bit p: byte 4n + e -> element 2n + e of pair 2j (e < 2), of 2j + 1 */
            const __m512i h = _mm512_loadu_si512(hi + 64 * (j / per));
            for (int p = 0; p < np; p++) {
                const __m512i bit = _mm512_set1_epi8((char)(1 << ((j % per) * np + p)));
                const uint64_t m = _mm512_test_epi8_mask(h, bit);
                const __m512i add = _mm512_set1_epi16((short)(16 << p));
                c0 = _mm512_mask_add_epi16(c0, (__mmask32)_pext_u64(m, 0x3333333333333333ull), c0, add);
                c1 = _mm512_mask_add_epi16(c1, (__mmask32)_pext_u64(m, 0xCCCCCCCCCCCCCCCCull), c1, add);
            }
        }
        if (np == 2) {
            buf[2 * j] = _mm512_permutex2var_epi16(w->tlo, c0, w->thi);
            buf[2 * j + 1] = _mm512_permutex2var_epi16(w->tlo, c1, w->thi);
        } else {
            buf[2 * j] = _mm512_permutexvar_epi16(c0, w->tlo);
            buf[2 * j + 1] = _mm512_permutexvar_epi16(c1, w->tlo);
        }
    }
}

static inline __m512bh bcast_pair(const uint16_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return (__m512bh)_mm512_set1_epi32(v);
}

/* RB rows (constant after inlining) against one expanded chunk; acc rows of 16 floats. */
static inline __attribute__((always_inline)) void rows_chunk(
    const int RB, const QW *w, int64_t s, int v0, int nv, const __m512i *buf, const uint16_t *x,
    const float *xsum, int64_t gsum, float *acc) {
    const int CH = RB <= 4 ? 2 : 1; /* independent dot chains per row */
    const int gv = w->G / 2;
    __m512 a[8];
    for (int r = 0; r < RB; r++) a[r] = _mm512_loadu_ps(acc + 16 * r);
    for (int g0 = 0; g0 < nv; g0 += gv) {
        const int g = (v0 + g0) / gv;
        __m512 part[8][2];
        for (int r = 0; r < RB; r++)
            for (int c = 0; c < CH; c++) part[r][c] = _mm512_setzero_ps();
        for (int v = 0; v < gv; v += CH)
            for (int c = 0; c < CH; c++) {
                const __m512bh wv = (__m512bh)buf[g0 + v + c];
                const int k = 2 * (v0 + g0 + v + c);
                for (int r = 0; r < RB; r++)
                    part[r][c] = _mm512_dpbf16_ps(part[r][c], bcast_pair(x + r * (int64_t)w->K + k), wv);
            }
        const __m512 sc = group_scales(w->scales, w->sup_s, w->K, w->G, s, g);
        for (int r = 0; r < RB; r++) {
            __m512 p = CH == 2 ? _mm512_add_ps(part[r][0], part[r][1]) : part[r][0];
            a[r] = _mm512_fmadd_ps(p, sc, a[r]);
        }
        if (w->has_min) {
            const __m512 mn = group_scales(w->mins, w->sup_m, w->K, w->G, s, g);
            for (int r = 0; r < RB; r++)
                a[r] = _mm512_fmadd_ps(_mm512_set1_ps(xsum[r * gsum + g]), mn, a[r]);
        }
    }
    for (int r = 0; r < RB; r++) _mm512_storeu_ps(acc + 16 * r, a[r]);
}

#define ROWS_CASE(n) \
    case n: rows_chunk(n, w, s, v0, nv, buf, xr, xs, groups, acc + 16 * r); break;

static void strip_tile(const QW *w, int64_t s, const uint16_t *x, const float *xsum, int rows,
                       const float *bias, float *out, int64_t N) {
    __m512i buf[CHUNK_V];
    float acc[ROW_TILE * 16];
    const int64_t groups = w->K / w->G;
    const __m512 b = bias ? _mm512_loadu_ps(bias + 16 * s) : _mm512_setzero_ps();
    for (int r = 0; r < rows; r++) _mm512_storeu_ps(acc + 16 * r, b);
    for (int v0 = 0; v0 < w->K / 2; v0 += CHUNK_V) {
        const int nv = w->K / 2 - v0 < CHUNK_V ? w->K / 2 - v0 : CHUNK_V;
        expand(w, s, v0, nv, buf);
        for (int r = 0; r < rows; r += 8) {
            const uint16_t *xr = x + r * (int64_t)w->K;
            const float *xs = xsum ? xsum + r * groups : 0;
            switch (rows - r < 8 ? rows - r : 8) {
                ROWS_CASE(1) ROWS_CASE(2) ROWS_CASE(3) ROWS_CASE(4)
                ROWS_CASE(5) ROWS_CASE(6) ROWS_CASE(7) ROWS_CASE(8)
            }
        }
    }
    for (int r = 0; r < rows; r++) memcpy(out + r * N + 16 * s, acc + 16 * r, 64);
}
#endif

/* x: bf16 [M, K]; xsum: fp32 [M, K / G] (sums of the bf16 x per group; NULL without mins);
 * out: fp32 [M, N] with N = 16 * strips. */
void qlinear(const uint16_t *x, const float *xsum, int64_t M, int K, int64_t N, int bits, int G,
             const void *codes, const uint32_t *planes, const void *scales, const void *mins,
             const uint16_t *sup_s, const uint16_t *sup_m, const uint16_t *table,
             const float *bias, float *out, int nthreads) {
#ifdef HAVE_KERNEL
    QW w = {K, bits, G, mins != 0, (const int8_t *)codes, (const uint8_t *)codes, planes, scales,
            mins, sup_s, sup_m, _mm512_loadu_si512(table), _mm512_loadu_si512(table + 32)};
    const int64_t strips = N / 16, tiles = (M + ROW_TILE - 1) / ROW_TILE;
#pragma omp parallel for num_threads(nthreads) schedule(static) collapse(2)
    for (int64_t t = 0; t < tiles; t++)
        for (int64_t s = 0; s < strips; s++) {
            const int64_t m0 = t * ROW_TILE;
            const int rows = M - m0 < ROW_TILE ? (int)(M - m0) : ROW_TILE;
            strip_tile(&w, s, x + m0 * K, xsum ? xsum + m0 * (K / G) : 0, rows, bias,
                       out + m0 * N, N);
        }
#else
    (void)x; (void)xsum; (void)M; (void)K; (void)N; (void)bits; (void)G; (void)codes; (void)planes;
    (void)scales; (void)mins; (void)sup_s; (void)sup_m; (void)table; (void)bias; (void)out; (void)nthreads;
#endif
}
