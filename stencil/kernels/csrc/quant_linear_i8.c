/* Quantized linear with int8 activations (llama.cpp's Q8_0 x Q8 route): out[M, N] = x'[M, K] @
 * W[N, K]^T (+ bias), where W is the packed low-bit weight of stencil/kernels/quant_weight.py (the
 * layout csrc/quant_linear.c reads) and x' is x rounded per block of 32 to int8 with one fp32
 * scale: d = max|x| / 127, q = round_half_even(x * (1 / d)), x' = q * d.
 *
 *   value(n, k) = (u(n, k) - Z) * scale(n, k / G) + min(n, k / G)
 *
 * with u the code as an unsigned byte (8-bit codes: code + 128, Z = zero + 128). The dot products
 * are AVX512-VNNI vpdpbusd (u8 weights x s8 activations, four k per int32 lane, exact), one int32
 * sum per (row, channel, group) started at -Z * sum(q), then in fp32:
 *   acc += d * scale * sum((u - Z) * q) + min * d * sum(q)
 * so the result is the fp32-accumulated product of x' and the exact weights.
 *
 * For each strip of 16 channels and chunk of 256 k the codes are expanded once into an L1 buffer of
 * bytes, lane n = channel n's four k in order (8-bit: one word permute of two pair vectors;
 * nibbles: (v | v << 12) & 0x0F0F0F0F of the byte pair; the bits above 4, stored in this quad
 * order, one shift and one masked or), then every row of the tile is dotted against it. Built
 * with -march=native by stencil/kernels/cpu_quant.py; qlinear_i8_available() is 0 where the CPU
 * or compiler lacks AVX512-VNNI (the caller then uses the bf16 kernel of csrc/quant_linear.c).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__BMI2__)
#include <immintrin.h>
#define HAVE_KERNEL 1
#endif

#define BLOCK 32    /* activation values per int8 scale */
#define CHUNK_Q 64  /* quad vectors per expanded chunk (256 k) */
#define ROW_TILE 64 /* rows per accumulator tile */
/* Rows up to which a call rounds its activations before its parallel region (µs) rather than in
 * it: one barrier fewer per linear. The 1.5B file's 141 linears at 1 row, 2 threads, alternated:
 * 1.03x / 1.48x / 1.34x with libgomp's spinning default on a shared machine (load 5.5), level
 * under OMP_WAIT_POLICY=PASSIVE (1.03x / 0.98x / 0.91x, load 6). */
#define SERIAL_ROWS 4

int qlinear_i8_available(void) {
#ifdef HAVE_KERNEL
    return 1;
#else
    return 0;
#endif
}

#ifdef HAVE_KERNEL
#include "quant_scales.h"

typedef struct {
    int K, bits, G, Z, has_min;
    const uint8_t *codes; /* int8 codes or nibbles */
    const uint32_t *planes;
    const void *scales, *mins;    /* fp16, or int8 with super-block scales (quant_scales.h) */
    const uint16_t *sup_s, *sup_m; /* the super-block scales and mins, or NULL */
} QW;

/* Row x [K] -> q [K] int8, d [K / 32] (the scale of each block) and per group of G (sq its sum of
 * q): zs [K / G] = -Z * sq, the int32 sums' start, and ds [K / G] = d * sq, the mins' factor (the
 * combine's per-row scalars, made once per row instead of once per strip). */
static void quantize_row(const float *x, int K, int G, int Z, int8_t *q, float *d, int32_t *zs,
                         float *ds) {
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (int b = 0; b < K / BLOCK; b++) {
        const __m512 lo = _mm512_loadu_ps(x + BLOCK * b), hi = _mm512_loadu_ps(x + BLOCK * b + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, lo),
                                                              _mm512_andnot_ps(sign, hi)));
        const float db = amax / 127.0f, id = amax > 0.0f ? 1.0f / db : 0.0f;
        const __m512i qlo = _mm512_cvtps_epi32(_mm512_mul_ps(lo, _mm512_set1_ps(id)));
        const __m512i qhi = _mm512_cvtps_epi32(_mm512_mul_ps(hi, _mm512_set1_ps(id)));
        _mm_storeu_si128((__m128i *)(q + BLOCK * b), _mm512_cvtepi32_epi8(qlo));
        _mm_storeu_si128((__m128i *)(q + BLOCK * b + 16), _mm512_cvtepi32_epi8(qhi));
        d[b] = db;
        if (G == 16) {
            const int32_t s0 = _mm512_reduce_add_epi32(qlo), s1 = _mm512_reduce_add_epi32(qhi);
            zs[2 * b] = -Z * s0, zs[2 * b + 1] = -Z * s1;
            ds[2 * b] = db * (float)s0, ds[2 * b + 1] = db * (float)s1;
        } else {
            const int32_t s0 = _mm512_reduce_add_epi32(_mm512_add_epi32(qlo, qhi));
            zs[b] = -Z * s0, ds[b] = db * (float)s0;
        }
    }
}

#ifndef AHEAD
#define AHEAD 2 /* chunks whose codes are prefetched ahead of the one expanded */
#endif

static inline void prefetch(const void *p, int64_t bytes) {
    for (int64_t i = 0; i < bytes; i += 64) _mm_prefetch((const char *)p + i, _MM_HINT_T0);
}

/* Quads [0, nq) of nibbles (byte 2n: channel n's k0 | k2 << 4, byte 2n + 1: k1 | k3 << 4) as
 * bytes, with HB (a constant after inlining) bits above 4 from hi: quad q's byte j is bits
 * (q % P) * HB.. of byte j of hi's vector q / P, P = 8 / HB (quant_weight.py's _high_bits). */
static inline __attribute__((always_inline)) void expand_nibbles(const uint8_t *src,
                                                                 const uint8_t *hi, int nq,
                                                                 const int HB, __m512i *buf) {
    const __m512i nib = _mm512_set1_epi32(0x0F0F0F0F);
    const __m512i top = _mm512_set1_epi8((char)(HB == 2 ? 0x30 : 0x10));
    const int P = HB ? 8 / HB : 1;
    for (int q0 = 0; q0 < nq; q0 += P) {
        const __m512i h = HB ? _mm512_loadu_si512(hi + 8 * HB * q0) : _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int i = 0; i < P; i++) {
            const int q = q0 + i;
            const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + 32 * q)));
            __m512i c = _mm512_ternarylogic_epi32(v, _mm512_slli_epi32(v, 12), nib, 0xA8); /* (a|b)&c */
            if (HB) { /* bits i*HB.. of each byte to bit 4: epi16 shifts, the mask drops what crosses */
                const int sh = 4 - i * HB;
                const __m512i b = sh >= 0 ? _mm512_slli_epi16(h, sh) : _mm512_srli_epi16(h, -sh);
                c = _mm512_ternarylogic_epi32(c, b, top, 0xF8); /* a | (b & c) */
            }
            buf[q] = c;
        }
    }
}

/* Expand quads [q0, q0 + nq) of strip s into unsigned bytes, lane n = channel n, k 4q..4q+3, and
 * prefetch the codes AHEAD chunks on (the next strip's past the last chunk: strips are contiguous).
 * Without it the rows' dot products wait on memory: 2.5 ms vs 0.8 ms from cache for a 9728x896
 * Q8_0 weight at 16 rows on one core. */
static void expand(const QW *w, int64_t s, int q0, int nq, __m512i *buf) {
    const int gb = w->sup_s ? 16 : 32; /* bytes of a group's 16 scales */
    const int64_t scale_off = (s * (w->K / w->G) + (int64_t)(q0 + AHEAD * CHUNK_Q) * 4 / w->G) * gb;
    prefetch((const char *)w->scales + scale_off, (int64_t)nq * 4 / w->G * gb);
    if (w->has_min) prefetch((const char *)w->mins + scale_off, (int64_t)nq * 4 / w->G * gb);
    if (w->sup_s) { /* a chunk is one super-block */
        const int64_t super_off = (s * (w->K / SUPER) + q0 / CHUNK_Q + AHEAD) * 32;
        prefetch((const char *)w->sup_s + super_off, 32);
        if (w->sup_m) prefetch((const char *)w->sup_m + super_off, 32);
    }
    if (w->bits == 8) { /* pair vectors 2q, 2q + 1: word n = channel n's (k0, k1), (k2, k3) */
        const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                             24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17,
                                             1, 16, 0);
        const __m512i flip = _mm512_set1_epi8((char)0x80);
        const uint8_t *src = w->codes + (s * (w->K / 2) + 2 * q0) * 32;
        prefetch(src + AHEAD * CHUNK_Q * 64, nq * 64);
        for (int q = 0; q < nq; q++)
            buf[q] = _mm512_xor_si512(_mm512_permutexvar_epi16(idx, _mm512_loadu_si512(src + 64 * q)),
                                      flip);
        return;
    }
    const int hb = w->bits - 4;
    const uint8_t *src = w->codes + (s * (w->K / 4) + q0) * 32;
    const uint8_t *hi = (const uint8_t *)w->planes + (s * (w->K / 4) + q0) * 8 * hb;
    prefetch(src + AHEAD * CHUNK_Q * 32, nq * 32);
    if (hb) prefetch(hi + AHEAD * CHUNK_Q * 8 * hb, nq * 8 * hb);
    if (hb == 2)
        expand_nibbles(src, hi, nq, 2, buf);
    else if (hb == 1)
        expand_nibbles(src, hi, nq, 1, buf);
    else
        expand_nibbles(src, hi, nq, 0, buf);
}

/* *acc += u8 wv . s8 (the 4 bytes at x, broadcast), with the broadcast folded into vpdpbusd's
 * memory operand (compilers load it separately: a second instruction per multiply). */
static inline __attribute__((always_inline)) void dpbusd_bcast(__m512i *acc, __m512i wv,
                                                               const int8_t *x) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(*acc) : "v"(wv), "m"(*(const int32_t *)x));
}

/* RB rows and group size G (constants after inlining) against one expanded chunk; acc rows of 16
 * floats. */
static inline __attribute__((always_inline)) void rows_chunk(
    const int RB, const int G, const QW *w, int64_t s, int q0, int nq, const __m512i *buf,
    const int8_t *q, const float *d, const int32_t *zs, const float *ds, float *acc) {
    const int gq = G / 4, groups = w->K / G, blocks = w->K / BLOCK;
    __m512 a[8];
    for (int r = 0; r < RB; r++) a[r] = _mm512_loadu_ps(acc + 16 * r);
    for (int g0 = 0; g0 < nq; g0 += gq) {
        const int g = (q0 + g0) / gq, b = g * G / BLOCK;
        __m512i part[8];
        for (int r = 0; r < RB; r++) part[r] = _mm512_set1_epi32(zs[r * groups + g]);
        for (int v = 0; v < gq; v++) {
            const __m512i wv = buf[g0 + v];
            const int k = 4 * (q0 + g0 + v);
            for (int r = 0; r < RB; r++) dpbusd_bcast(&part[r], wv, q + r * (int64_t)w->K + k);
        }
        const __m512 sc = group_scales(w->scales, w->sup_s, w->K, G, s, g);
        for (int r = 0; r < RB; r++)
            a[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(part[r]),
                                   _mm512_mul_ps(sc, _mm512_set1_ps(d[r * blocks + b])), a[r]);
        if (w->has_min) {
            const __m512 mn = group_scales(w->mins, w->sup_m, w->K, G, s, g);
            for (int r = 0; r < RB; r++)
                a[r] = _mm512_fmadd_ps(_mm512_set1_ps(ds[r * groups + g]), mn, a[r]);
        }
    }
    for (int r = 0; r < RB; r++) _mm512_storeu_ps(acc + 16 * r, a[r]);
}

#define ROWS_CALL(n, G) \
    rows_chunk(n, G, w, s, q0, nq, buf, q + r * (int64_t)w->K, d + r * blocks, zs + r * groups, \
               ds + r * groups, acc + 16 * r)
#define ROWS_CASE(n) \
    case n: if (w->G == 16) ROWS_CALL(n, 16); else ROWS_CALL(n, 32); break;

#ifndef AMX_MIN
#define AMX_MIN 9 /* rows of a tile from which its dot products go to AMX (measured: 8 rows tie) */
#endif
#include "quant_amx.h"

/* Strip s (16 channels) for a tile of rows: each chunk of codes expanded once, then dotted with
 * every row (VNNI, RB <= 8 rows a pass; or AMX from AMX_MIN rows where amx is set). */
static void strip_tile(const QW *w, int64_t s, const int8_t *q, const float *d, const int32_t *zs,
                       const float *ds, int rows, const float *bias, float *out, int64_t N,
                       int amx, int *config) {
    __m512i buf[CHUNK_Q];
    float acc[ROW_TILE * 16];
    const int64_t groups = w->K / w->G, blocks = w->K / BLOCK;
    const __m512 b = bias ? _mm512_loadu_ps(bias + 16 * s) : _mm512_setzero_ps();
    for (int r = 0; r < rows; r++) _mm512_storeu_ps(acc + 16 * r, b);
    for (int q0 = 0; q0 < w->K / 4; q0 += CHUNK_Q) {
        const int nq = w->K / 4 - q0 < CHUNK_Q ? w->K / 4 - q0 : CHUNK_Q;
        expand(w, s, q0, nq, buf);
#ifdef HAVE_AMX
        if (amx) {
            rows_chunk_amx(w, s, q0, nq, buf, q, d, zs, ds, rows, acc, config);
            continue;
        }
#else
        (void)amx, (void)config;
#endif
        for (int r = 0; r < rows; r += 8) {
            switch (rows - r < 8 ? rows - r : 8) {
                ROWS_CASE(1) ROWS_CASE(2) ROWS_CASE(3) ROWS_CASE(4)
                ROWS_CASE(5) ROWS_CASE(6) ROWS_CASE(7) ROWS_CASE(8)
            }
        }
    }
    for (int r = 0; r < rows; r++) memcpy(out + r * N + 16 * s, acc + 16 * r, 64);
}

/* Whether a call of M rows in groups of G may run tiles on AMX (each thread then releases its
 * tiles at the end): not for groups of 16 (Q6_K), where a tile's store per 16 k costs more than
 * the vpdpbusd it saves (measured by quant_rows_bench --against, 1 thread: 0.5-0.9x at 9-64 rows
 * on the 1.5B's Q6_K head, 1.3-1.6x for its Q4_K linears at 32-64 rows). */
static int use_amx(int64_t M, int G) {
#ifdef HAVE_AMX
    return M >= AMX_MIN && G >= 32 && amx_ready();
#else
    (void)M, (void)G;
    return 0;
#endif
}

static void release_tiles(int amx) {
#ifdef HAVE_AMX
    if (amx) _tile_release();
#else
    (void)amx;
#endif
}
#endif

/* x: fp32 [M, K] (K a multiple of 32); out: fp32 [M, N] with N = 16 * strips; zero: the code of
 * value 0 as stored (8-bit codes are signed). Returns 0, or -1 when scratch memory is short. */
int qlinear_i8(const float *x, int64_t M, int K, int64_t N, int bits, int G, int zero,
               const void *codes, const uint32_t *planes, const void *scales, const void *mins,
               const uint16_t *sup_s, const uint16_t *sup_m, const float *bias, float *out,
               int nthreads) {
#ifdef HAVE_KERNEL
    const QW w = {K, bits, G, bits == 8 ? zero + 128 : zero, mins != 0, (const uint8_t *)codes,
                  planes, scales, mins, sup_s, sup_m};
    const int64_t strips = N / 16, tiles = (M + ROW_TILE - 1) / ROW_TILE;
    const int64_t blocks = K / BLOCK, groups = K / G;
    int8_t *q = malloc(M * K + 64);
    float *d = malloc(M * blocks * sizeof(float) + 64);
    int32_t *zs = malloc(M * groups * sizeof(int32_t) + 64);
    float *ds = malloc(M * groups * sizeof(float) + 64);
    if (!q || !d || !zs || !ds) {
        free(q); free(d); free(zs); free(ds);
        return -1;
    }
    const int amx = use_amx(M, G);
    if (M <= SERIAL_ROWS) /* here, saving the parallel region a barrier */
        for (int64_t m = 0; m < M; m++)
            quantize_row(x + m * K, K, G, w.Z, q + m * K, d + m * blocks, zs + m * groups,
                         ds + m * groups);
#pragma omp parallel num_threads(nthreads)
    {
        int config = 0;
        if (M > SERIAL_ROWS)
#pragma omp for schedule(static)
            for (int64_t m = 0; m < M; m++)
                quantize_row(x + m * K, K, G, w.Z, q + m * K, d + m * blocks, zs + m * groups,
                             ds + m * groups);
#pragma omp for schedule(static) collapse(2)
        for (int64_t t = 0; t < tiles; t++)
            for (int64_t s = 0; s < strips; s++) {
                const int64_t m0 = t * ROW_TILE;
                const int rows = M - m0 < ROW_TILE ? (int)(M - m0) : ROW_TILE;
                strip_tile(&w, s, q + m0 * K, d + m0 * blocks, zs + m0 * groups,
                           ds + m0 * groups, rows, bias,
                           out + m0 * N, N, amx && rows >= AMX_MIN, &config);
            }
        release_tiles(amx);
    }
    free(q); free(d); free(zs); free(ds);
    return 0;
#else
    (void)x; (void)M; (void)K; (void)N; (void)bits; (void)G; (void)zero; (void)codes; (void)planes;
    (void)scales; (void)mins; (void)sup_s; (void)sup_m; (void)bias; (void)out; (void)nthreads;
    return -1;
#endif
}

/* Mixture-of-experts: E weights of one format (K, N, bits, G, zero), expert e's rows of x are
 * [offsets[e], offsets[e + 1]) (rows grouped by expert), each multiplied by its expert's weight
 * (and bias, or NULL) into the same rows of out [M, N]. One parallel region for every expert: the
 * work units are (expert, row tile, strip), so a step's routed rows cost one fork-join per
 * projection instead of one per expert. Returns 0, or -1 when scratch memory is short. */
/* dst = sum_j w[j] * rows[pos[j]], each product rounded before its add (no fused multiply-add:
 * the same sums as torch's index_add_ of h * w). */
__attribute__((optimize("fp-contract=off"))) static void combine_row(
    const float *rows, int64_t N, const int64_t *pos, const float *w, int top, float *dst) {
    for (int64_t n = 0; n < N; n++) dst[n] = 0.0f;
    for (int j = 0; j < top; j++) {
        const float *src = rows + pos[j] * N, wj = w[j];
        for (int64_t n = 0; n < N; n++) dst[n] += src[n] * wj;
    }
}

/* MoE experts in one call. rows (or NULL): grouped row m reads x[rows[m]] (the gather).
 * pos/w (or NULL): the combine: token t's output is sum_j w[t*top+j] * out[pos[t*top+j]] over its
 * top assignments, in order (pos ascending: index_add_'s order), written to combined [T, N]. */
int qlinear_i8_grouped(const float *x, const int64_t *offsets, int E, int K, int64_t N, int bits,
                       int G, int zero, const void *const *codes, const uint32_t *const *planes,
                       const void *const *scales, const void *const *mins,
                       const uint16_t *const *sup_s, const uint16_t *const *sup_m,
                       const float *const *bias, float *out, int nthreads, const int64_t *rows,
                       int64_t T, int top, const int64_t *pos, const float *w, float *combined) {
#ifdef HAVE_KERNEL
    const int64_t M = offsets[E], strips = N / 16, blocks = K / BLOCK, groups = K / G;
    const int Z = bits == 8 ? zero + 128 : zero;
    int8_t *q = malloc(M * K + 64);
    float *d = malloc(M * blocks * sizeof(float) + 64);
    int32_t *zs = malloc(M * groups * sizeof(int32_t) + 64);
    float *ds = malloc(M * groups * sizeof(float) + 64);
    int64_t *first = malloc((E + 1) * sizeof(int64_t));
    if (!q || !d || !zs || !ds || !first) {
        free(q); free(d); free(zs); free(ds); free(first);
        return -1;
    }
    first[0] = 0;
    for (int e = 0; e < E; e++) {
        const int64_t rows = offsets[e + 1] - offsets[e];
        first[e + 1] = first[e] + (rows + ROW_TILE - 1) / ROW_TILE * strips;
    }
    const int amx = use_amx(M, G);
#pragma omp parallel num_threads(nthreads)
    {
        int config = 0;
#pragma omp for schedule(static)
        for (int64_t m = 0; m < M; m++)
            quantize_row(x + (rows ? rows[m] : m) * K, K, G, Z, q + m * K, d + m * blocks,
                         zs + m * groups, ds + m * groups);
#pragma omp for schedule(static)
        for (int64_t u = 0; u < first[E]; u++) {
            int lo = 0, hi = E - 1; /* the expert whose units hold u: first[e] <= u < first[e + 1] */
            while (lo < hi) {
                const int mid = (lo + hi + 1) / 2;
                if (first[mid] <= u) lo = mid; else hi = mid - 1;
            }
            const int e = lo;
            const int64_t t = (u - first[e]) / strips, s = (u - first[e]) % strips;
            const int64_t m0 = offsets[e] + t * ROW_TILE, end = offsets[e + 1];
            const int rows = end - m0 < ROW_TILE ? (int)(end - m0) : ROW_TILE;
            const QW w = {K, bits, G, Z, mins[e] != 0, (const uint8_t *)codes[e], planes[e],
                          scales[e], mins[e], sup_s[e], sup_m[e]};
            strip_tile(&w, s, q + m0 * K, d + m0 * blocks, zs + m0 * groups,
                           ds + m0 * groups, rows, bias[e],
                       out + m0 * N, N, amx && rows >= AMX_MIN, &config);
        }
        release_tiles(amx);
        if (pos) { /* after the loop's barrier: every expert row is written */
#pragma omp for schedule(static)
            for (int64_t t = 0; t < T; t++)
                combine_row(out, N, pos + t * top, w + t * top, top, combined + t * N);
        }
    }
    free(q); free(d); free(zs); free(ds); free(first);
    return 0;
#else
    (void)x; (void)offsets; (void)E; (void)K; (void)N; (void)bits; (void)G; (void)zero;
    (void)codes; (void)planes; (void)scales; (void)mins; (void)sup_s; (void)sup_m; (void)bias;
    (void)out; (void)nthreads; (void)rows; (void)T; (void)top; (void)pos; (void)w; (void)combined;
    return -1;
#endif
}
