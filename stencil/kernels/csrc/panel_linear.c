/* fp32 linear over a panel-packed weight: out[M, N] = x[M, K] @ W[N, K]^T (+ bias).
 *
 * The weight is stored once, at load, as panels of 48 output channels (the last one 16 or 32
 * wide), each panel k-major: panel p holds W[48p + j, k] at [k][j], so one k step of a panel is
 * three contiguous 16-float vectors. A tile of up to 8 rows x one panel keeps its 24 sums in
 * registers; the rows' values are broadcast one k at a time (AVX-512 FMA).
 *
 * Each thread takes a contiguous range of panels and runs every row tile of a panel while the
 * panel is in cache, so the weight is read from memory once per call whatever M is. While it
 * works on a panel it prefetches the next one, spread evenly over the panel's k steps (all
 * tiles): at a decode step's few rows the weight streams at the memory's pace, at 32-64 rows
 * the stream hides under the arithmetic. Where the two are level (16-32 rows) this is what
 * oneDNN's packed GEMM does not do, and where it loses 1.2-1.7x (bench/cpu_kernels_bench.py).
 * K is walked in chunks of at most 1024 so a panel's chunk stays in L2 for the tiles after the
 * first. Built with -march=native by stencil/kernels/panel_linear.py;
 * panel_linear_available() is 0 where the compiler or CPU lacks AVX-512F.
 */
#include <omp.h>
#include <stdint.h>

#include "cpu_math.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#define HAVE_KERNEL 1
#endif

#define PANEL 48   /* output channels per panel */
#define ROWS 8     /* rows per register tile */
#define K_CHUNK 1024

int panel_linear_available(void) {
#ifdef HAVE_KERNEL
    return 1;
#else
    return 0;
#endif
}

#ifdef HAVE_KERNEL
/* The next panel's lines still to prefetch, and the bytes owed per k step. */
typedef struct {
    const char *next, *end;
    int64_t per_k, owed;
} Stream;

/* c[mr, 16 * nv] (+)= a[mr, kc] @ b[kc, 16 * nv]; `first` starts the sums at zero. */
static inline __attribute__((always_inline)) void tile(const int mr, const int nv, const float *a,
                                                       int64_t lda, const float *b, int64_t kc,
                                                       float *c, int64_t ldc, int first,
                                                       Stream *s) {
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
        for (s->owed += s->per_k; s->owed >= 64 && s->next < s->end; s->owed -= 64, s->next += 64)
            prefetch_line(s->next);
    }
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++) _mm512_storeu_ps(c + r * ldc + 16 * v, acc[r][v]);
}

#define TILE(MR, NV) \
    case MR:         \
        tile(MR, NV, a, lda, b, kc, c, ldc, first, s); \
        return;
#define TILES(NV) \
    switch (mr) { TILE(1, NV) TILE(2, NV) TILE(3, NV) TILE(4, NV) TILE(5, NV) TILE(6, NV) TILE(7, NV) TILE(8, NV) }

static void run_tile(int mr, int nv, const float *a, int64_t lda, const float *b, int64_t kc,
                     float *c, int64_t ldc, int first, Stream *s) {
    if (nv == 3) {
        TILES(3)
    } else if (nv == 2) {
        TILES(2)
    } else {
        TILES(1)
    }
}

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* One panel (n0, `width` channels) for all M rows, prefetching [next, next_end). */
static void panel(const float *x, const float *wp, float *out, int64_t M, int64_t N, int64_t K,
                  int64_t n0, int64_t width, const char *next, const char *next_end) {
    const float *b = wp + n0 * K;
    const int64_t tiles = (M + ROWS - 1) / ROWS;
    Stream s = {next, next_end, ((next_end - next) + tiles * K - 1) / (tiles * K), 0};
    for (int64_t k0 = 0; k0 < K; k0 += K_CHUNK) {
        const int64_t kc = min64(K_CHUNK, K - k0);
        for (int64_t m0 = 0; m0 < M; m0 += ROWS)
            run_tile((int)min64(ROWS, M - m0), (int)(width / 16), x + m0 * K + k0, K,
                     b + k0 * width, kc, out + m0 * N + n0, N, k0 == 0, &s);
    }
}
#endif

/* x [M, K], wp the packed weight (N a multiple of 16), bias [N] or NULL, out [M, N]. */
void panel_linear(const float *x, const float *wp, const float *bias, float *out, int64_t M,
                  int64_t N, int64_t K, int threads) {
#ifdef HAVE_KERNEL
    const int64_t panels = (N + PANEL - 1) / PANEL;
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int64_t p0 = panels * t / nt, p1 = panels * (t + 1) / nt;
        for (int64_t p = p0; p < p1; p++) {
            const int64_t n0 = p * PANEL, width = min64(PANEL, N - n0);
            const int64_t n1 = n0 + width, next_width = p + 1 < p1 ? min64(PANEL, N - n1) : 0;
            const char *next = (const char *)(wp + n1 * K);
            panel(x, wp, out, M, N, K, n0, width, next, next + next_width * K * 4);
            if (bias)
                for (int64_t m = 0; m < M; m++)
                    for (int64_t j = n0; j < n1; j++) out[m * N + j] += bias[j];
        }
    }
#endif
}
