/* Linear over a panel-packed weight: out[M, N] = x[M, K] @ W[N, K]^T (+ bias), fp32 or bf16.
 *
 * The weight is stored once, at load, as panels of 48 output channels (the last one 16 or 32
 * wide), each panel k-major: fp32 panel p holds W[48p + j, k] at [k][j], so one k step of a
 * panel is three contiguous 16-float vectors; bf16 holds k pairs, W[48p + j, k] at
 * [k / 2][j][k % 2], so one step of two k is three 32-value vectors for AVX512-BF16's
 * vdpbf16ps. A tile of up to 8 rows x one panel keeps its 24 fp32 sums in registers; the rows'
 * values (bf16: pairs of values) are broadcast one step at a time. bf16 sums round to bf16 once,
 * after the bias, at the store.
 *
 * Each thread takes a contiguous range of panels and runs every row tile of a panel while the
 * panel is in cache, so the weight is read from memory once per call whatever M is. While it
 * works on a panel it prefetches the next one, spread evenly over the panel's steps (all tiles):
 * at a decode step's few rows the weight streams at the memory's pace, at 32-64 rows the stream
 * hides under the arithmetic, which oneDNN's packed GEMM does not do (1.2-1.7x at 8-64 rows,
 * bench/kernels/cpu_kernels_bench.py). fp32 walks K in chunks of at most 1024 so a panel's chunk stays in
 * L2 for the tiles after the first (bf16 keeps whole K: its sums never leave the registers).
 * Built with -march=native by stencil/kernels/panel_linear.py; panel_linear_available() says
 * which dtypes this CPU and compiler run (bit 0 fp32: AVX-512F, bit 1 bf16: AVX512-BF16).
 */
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "cpu_math.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#define HAVE_F32 1
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
#define HAVE_BF16 1
#endif
#endif

#define PANEL 48   /* output channels per panel */
#define ROWS 8     /* rows per register tile */
#define K_CHUNK 1024

int panel_linear_available(void) {
    int dtypes = 0;
#ifdef HAVE_F32
    dtypes |= 1;
#endif
#ifdef HAVE_BF16
    dtypes |= 2;
#endif
    return dtypes;
}

#ifdef HAVE_F32
/* The next panel's lines still to prefetch, and the bytes owed per step. */
typedef struct {
    const char *next, *end;
    int64_t per_step, owed;
} Stream;

static inline __attribute__((always_inline)) void stream_step(Stream *s) {
    for (s->owed += s->per_step; s->owed >= 64 && s->next < s->end; s->owed -= 64, s->next += 64)
        prefetch_line(s->next);
}

/* A tile's sums for 16 channels, plus their bias where there is one. */
static inline __attribute__((always_inline)) __m512 with_bias(__m512 sum, const float *bias) {
    return bias ? _mm512_add_ps(sum, _mm512_loadu_ps(bias)) : sum;
}

/* c[mr, 16 * nv] (+)= a[mr, kc] @ b[kc, 16 * nv] (+ bias); `first` starts the sums at zero. */
static inline __attribute__((always_inline)) void tile_f32(const int mr, const int nv,
                                                           const float *a, int64_t lda,
                                                           const float *b, int64_t kc, float *c,
                                                           int64_t ldc, int first,
                                                           const float *bias, Stream *s) {
    __m512 acc[ROWS][3];
    const int width = 16 * nv;
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++)
            acc[r][v] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(c + r * ldc + 16 * v);
    for (int64_t k = 0; k < kc; k++) {
        __m512 w[3];
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++) w[v] = _mm512_loadu_ps(b + k * width + 16 * v);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            const __m512 x = _mm512_set1_ps(a[r * lda + k]);
#pragma GCC unroll 3
            for (int v = 0; v < nv; v++) acc[r][v] = _mm512_fmadd_ps(x, w[v], acc[r][v]);
        }
        stream_step(s);
    }
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++)
            _mm512_storeu_ps(c + r * ldc + 16 * v, with_bias(acc[r][v], bias ? bias + 16 * v : NULL));
}

#ifdef HAVE_BF16
/* c[mr, 16 * nv] = bf16(a[mr, K] @ b[K, 16 * nv] + bias), K even, sums in fp32. */
static inline __attribute__((always_inline)) void tile_bf16(const int mr, const int nv,
                                                            const uint16_t *a, int64_t lda,
                                                            const uint16_t *b, int64_t K,
                                                            uint16_t *c, int64_t ldc,
                                                            const float *bias, Stream *s) {
    __m512 acc[ROWS][3];
    const int width = 16 * nv;
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++) acc[r][v] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += 2) {
        __m512bh w[3];
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++)
            w[v] = (__m512bh)_mm512_loadu_si512(b + k * width + 32 * v);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            int32_t pair;
            memcpy(&pair, a + r * lda + k, sizeof pair);
            const __m512bh x = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 3
            for (int v = 0; v < nv; v++) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], x, w[v]);
        }
        stream_step(s);
    }
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++) {
            const __m512 sum = with_bias(acc[r][v], bias ? bias + 16 * v : NULL);
            _mm256_storeu_si256((__m256i *)(c + r * ldc + 16 * v),
                                (__m256i)_mm512_cvtneps_pbh(sum));
        }
}
#endif

/* TILE(mr, nv, args...) with mr and nv as constants, so each tile's loops unroll fully. */
#define CASE(TILE, MR, NV, ...) \
    case MR:                    \
        TILE(MR, NV, __VA_ARGS__); \
        return;
#define BY_ROWS(TILE, NV, ...)                                                                 \
    switch (mr) {                                                                              \
        CASE(TILE, 1, NV, __VA_ARGS__) CASE(TILE, 2, NV, __VA_ARGS__)                          \
        CASE(TILE, 3, NV, __VA_ARGS__) CASE(TILE, 4, NV, __VA_ARGS__)                          \
        CASE(TILE, 5, NV, __VA_ARGS__) CASE(TILE, 6, NV, __VA_ARGS__)                          \
        CASE(TILE, 7, NV, __VA_ARGS__) CASE(TILE, 8, NV, __VA_ARGS__)                          \
    }
#define BY_SHAPE(TILE, ...)                  \
    if (nv == 3) {                           \
        BY_ROWS(TILE, 3, __VA_ARGS__)        \
    } else if (nv == 2) {                    \
        BY_ROWS(TILE, 2, __VA_ARGS__)        \
    } else {                                 \
        BY_ROWS(TILE, 1, __VA_ARGS__)        \
    }

static void run_f32(int mr, int nv, const float *a, int64_t lda, const float *b, int64_t kc,
                    float *c, int64_t ldc, int first, const float *bias, Stream *s) {
    BY_SHAPE(tile_f32, a, lda, b, kc, c, ldc, first, bias, s)
}

#ifdef HAVE_BF16
static void run_bf16(int mr, int nv, const uint16_t *a, int64_t lda, const uint16_t *b,
                     int64_t K, uint16_t *c, int64_t ldc, const float *bias, Stream *s) {
    BY_SHAPE(tile_bf16, a, lda, b, K, c, ldc, bias, s)
}
#endif

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* One panel (n0, `width` channels) for all M rows, prefetching [next, next_end). */
static void panel(const void *x, const void *wp, const float *bias, void *out, int64_t M,
                  int64_t N, int64_t K, int bf16, int64_t n0, int64_t width, const char *next,
                  const char *next_end) {
    const int64_t tiles = (M + ROWS - 1) / ROWS, steps = tiles * (bf16 ? K / 2 : K);
    Stream s = {next, next_end, ((next_end - next) + steps - 1) / steps, 0};
    const int nv = (int)(width / 16);
    if (bias) bias += n0;
#ifdef HAVE_BF16
    if (bf16) {
        const uint16_t *b = (const uint16_t *)wp + n0 * K;
        for (int64_t m0 = 0; m0 < M; m0 += ROWS)
            run_bf16((int)min64(ROWS, M - m0), nv, (const uint16_t *)x + m0 * K, K, b, K,
                     (uint16_t *)out + m0 * N + n0, N, bias, &s);
        return;
    }
#endif
    const float *b = (const float *)wp + n0 * K;
    for (int64_t k0 = 0; k0 < K; k0 += K_CHUNK) {
        const int64_t kc = min64(K_CHUNK, K - k0);
        for (int64_t m0 = 0; m0 < M; m0 += ROWS)
            run_f32((int)min64(ROWS, M - m0), nv, (const float *)x + m0 * K + k0, K,
                    b + k0 * width, kc, (float *)out + m0 * N + n0, N, k0 == 0,
                    k0 + kc == K ? bias : NULL, &s);
    }
}
#endif

/* x [M, K] and out [M, N] in the weight's dtype (`bf16`: 0 fp32, 1 bf16; bf16 needs K even),
 * wp the packed weight (N a multiple of 16), bias fp32 [N] or NULL. */
void panel_linear(const void *x, const void *wp, const float *bias, void *out, int64_t M,
                  int64_t N, int64_t K, int bf16, int threads) {
#ifndef HAVE_BF16
    if (bf16) return;
#endif
#ifdef HAVE_F32
    const int64_t panels = (N + PANEL - 1) / PANEL, item = bf16 ? 2 : 4;
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int64_t p0 = panels * t / nt, p1 = panels * (t + 1) / nt;
        for (int64_t p = p0; p < p1; p++) {
            const int64_t n0 = p * PANEL, width = min64(PANEL, N - n0);
            const int64_t n1 = n0 + width, next_width = p + 1 < p1 ? min64(PANEL, N - n1) : 0;
            const char *next = (const char *)wp + n1 * K * item;
            panel(x, wp, bias, out, M, N, K, bf16, n0, width, next, next + next_width * K * item);
        }
    }
#endif
}

/* Mixture-of-experts: E packed weights of one shape [N, K] and dtype; expert e's rows of x are
 * [offsets[e], offsets[e + 1]) (rows grouped by expert), each times its expert's weight (+ its
 * bias, or NULL) into the same rows of out [M, N]. One parallel region for every expert: the
 * (expert with rows, panel) units are split into one contiguous range per thread, as
 * panel_linear splits one weight's panels. */
void panel_linear_grouped(const void *x, const int64_t *offsets, int E, const void *const *wps,
                          const float *const *bias, void *out, int64_t N, int64_t K, int bf16,
                          int threads) {
#ifndef HAVE_BF16
    if (bf16) return;
#endif
#ifdef HAVE_F32
    const int64_t panels = (N + PANEL - 1) / PANEL, item = bf16 ? 2 : 4;
    int64_t units = 0;
    for (int e = 0; e < E; e++) units += offsets[e + 1] > offsets[e] ? panels : 0;
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int64_t u0 = units * t / nt, u1 = units * (t + 1) / nt;
        int64_t u = 0;
        for (int e = 0; e < E && u < u1; e++) {
            const int64_t m0 = offsets[e], rows = offsets[e + 1] - m0;
            if (!rows) continue;
            for (int64_t p = 0; p < panels; p++, u++) {
                if (u < u0 || u >= u1) continue;
                const int64_t n0 = p * PANEL, width = min64(PANEL, N - n0);
                const int64_t n1 = n0 + width;
                const int64_t next_width = p + 1 < panels && u + 1 < u1 ? min64(PANEL, N - n1) : 0;
                const char *next = (const char *)wps[e] + n1 * K * item;
                panel((const char *)x + m0 * K * item, wps[e], bias[e],
                      (char *)out + m0 * N * item, rows, N, K, bf16, n0, width, next,
                      next + next_width * K * item);
            }
        }
    }
#endif
}
