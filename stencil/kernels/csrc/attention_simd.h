/* The vector building blocks of csrc/paged_attention.c (included once, by it): cache rows as
 * float32, the 4-row x 4-key dot products of a chunk's scores (fp32 keys, or bf16 keys with
 * AVX512-BF16 pair dot products), the probabilities-times-values accumulation held in registers,
 * and cache-row prefetches. Every output lane is computed by the same instructions whatever the
 * number of rows or keys around it, which keeps the kernel's results row-invariant. */
#ifndef STENCIL_ATTENTION_SIMD_H
#define STENCIL_ATTENTION_SIMD_H

#include <stdint.h>

#include "cpu_math.h"
#if defined(__AVX512F__) && defined(__AVX512DQ__)
#include <immintrin.h>
#define HAVE_AVX512 1
#if defined(__AVX512BF16__)
#define HAVE_AVX512_BF16 1
#endif
#endif

#define MAX_ROWS 64
#define MAX_DIM 256
#define MAX_CHUNK 64 /* keys per online-softmax update: whole blocks, so block_size <= 64 */

/* A cache row as float32 (the row itself, or widened from bf16 into `tmp`). */
static inline const float *cache_row(const void *row, int bf16, int dim, float *tmp) {
    if (!bf16) return (const float *)row;
    for (int d = 0; d < dim; d++) tmp[d] = bf16_to_f32(((const uint16_t *)row)[d]);
    return tmp;
}

static inline float dot(const float *a, const float *b, int dim) {
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (int d = 0; d < dim; d++) s += a[d] * b[d];
    return s;
}

#ifdef HAVE_AVX512
/* [sum(a), sum(b), sum(c), sum(d)]: four horizontal sums for the price of about one. */
static inline __m128 hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
    __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
    __m512 abcd = _mm512_add_ps(
        _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))),
        _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))));
    __m256 half = _mm256_add_ps(_mm512_castps512_ps256(abcd), _mm512_extractf32x8_ps(abcd, 1));
    return _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1));
}

/* Scores of rows x four keys (dim a multiple of 16): out[r * stride + i] = q_r . k_i. Four rows
 * at a time share each loaded key chunk (16 accumulators); the remaining rows one by one. */
static inline void dot4(const float *const *qrow, int rows, const float *const k[4], int dim,
                        float *out, int stride) {
    int r = 0;
    for (; r + 4 <= rows; r += 4) {
        __m512 c[4][4];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) c[i][j] = _mm512_setzero_ps();
        for (int d = 0; d < dim; d += 16) {
            __m512 kv[4];
            for (int j = 0; j < 4; j++) kv[j] = _mm512_loadu_ps(k[j] + d);
            for (int i = 0; i < 4; i++) {
                __m512 q = _mm512_loadu_ps(qrow[r + i] + d);
                for (int j = 0; j < 4; j++) c[i][j] = _mm512_fmadd_ps(q, kv[j], c[i][j]);
            }
        }
        for (int i = 0; i < 4; i++)
            _mm_storeu_ps(out + (int64_t)(r + i) * stride, hsum4(c[i][0], c[i][1], c[i][2], c[i][3]));
    }
    for (; r < rows; r++) {
        __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        for (int d = 0; d < dim; d += 16) {
            __m512 q = _mm512_loadu_ps(qrow[r] + d);
            s0 = _mm512_fmadd_ps(q, _mm512_loadu_ps(k[0] + d), s0);
            s1 = _mm512_fmadd_ps(q, _mm512_loadu_ps(k[1] + d), s1);
            s2 = _mm512_fmadd_ps(q, _mm512_loadu_ps(k[2] + d), s2);
            s3 = _mm512_fmadd_ps(q, _mm512_loadu_ps(k[3] + d), s3);
        }
        _mm_storeu_ps(out + (int64_t)r * stride, hsum4(s0, s1, s2, s3));
    }
}
#endif

#ifdef HAVE_AVX512_BF16
/* A query row as bf16 (dim a multiple of 32). Exact for a bf16 model, whose queries were bf16
 * before the wrapper widened them. */
static inline void to_bf16(const float *src, int dim, uint16_t *dst) {
    for (int d = 0; d < dim; d += 32) {
        __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + d + 16), _mm512_loadu_ps(src + d));
        _mm512_storeu_si512(dst + d, (__m512i)v);
    }
}

/* dot4 for bf16 keys read in place (rows a multiple of 4): AVX512-BF16 pair dot products, fp32
 * accumulation, four rows sharing each loaded key chunk. */
static inline void dot4_bf16(const uint16_t (*qb)[MAX_DIM], int rows, const uint16_t *const k[4],
                             int dim, float *out, int stride) {
    for (int r = 0; r < rows; r += 4) {
        __m512 c[4][4];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) c[i][j] = _mm512_setzero_ps();
        for (int d = 0; d < dim; d += 32) {
            __m512bh kv[4];
            for (int j = 0; j < 4; j++) kv[j] = (__m512bh)_mm512_loadu_si512(k[j] + d);
            for (int i = 0; i < 4; i++) {
                __m512bh q = (__m512bh)_mm512_loadu_si512(qb[r + i] + d);
                for (int j = 0; j < 4; j++) c[i][j] = _mm512_dpbf16_ps(c[i][j], q, kv[j]);
            }
        }
        for (int i = 0; i < 4; i++)
            _mm_storeu_ps(out + (int64_t)(r + i) * stride, hsum4(c[i][0], c[i][1], c[i][2], c[i][3]));
    }
}
#endif

/* Prefetch rows [from, to) of a list of cache rows, `bytes` each: a decode step otherwise waits on
 * each block's lines. */
static inline void prefetch_rows(const void *const *rows, int bytes, int from, int to) {
    for (int j = from; j < to; j++)
        for (int o = 0; o < bytes; o += 64) prefetch_line((const char *)rows[j] + o);
}

#ifdef HAVE_AVX512
/* 16 values of a cache row as float32: loaded, or widened from bf16 in registers. */
static inline __m512 load16(const void *row, int d, int bf16) {
    if (!bf16) return _mm512_loadu_ps((const float *)row + d);
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + d));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* acc[r] += sum_j p[r][j] * v_j over nk keys, 4 rows x 64 dims of accumulators held in
 * registers across the keys (dim a multiple of 64; rows padded to a multiple of 4 by the caller,
 * the padding rows' p all zero). Each value chunk is loaded once per 4 rows, where the row-by-row
 * loop loaded and stored the accumulator once per key. The first pass prefetches the next
 * chunk's first nk value rows, one per key. */
static inline void accumulate_v(float (*acc)[MAX_DIM], float (*p)[MAX_CHUNK], int rows,
                                const void *const *vrow, int bf16, int nk, int dim,
                                const void *const *next_v, int next_n) {
    int bytes = dim * (bf16 ? 2 : 4);
    for (int r0 = 0; r0 < rows; r0 += 4)
        for (int d0 = 0; d0 < dim; d0 += 64) {
            __m512 c[4][4];
            for (int r = 0; r < 4; r++)
                for (int i = 0; i < 4; i++) c[r][i] = _mm512_loadu_ps(acc[r0 + r] + d0 + 16 * i);
            for (int j = 0; j < nk; j++) {
                if (r0 + d0 == 0 && j < next_n) prefetch_rows(next_v, bytes, j, j + 1);
                __m512 v[4];
                for (int i = 0; i < 4; i++) v[i] = load16(vrow[j], d0 + 16 * i, bf16);
                for (int r = 0; r < 4; r++) {
                    __m512 w = _mm512_set1_ps(p[r0 + r][j]);
                    for (int i = 0; i < 4; i++) c[r][i] = _mm512_fmadd_ps(w, v[i], c[r][i]);
                }
            }
            for (int r = 0; r < 4; r++)
                for (int i = 0; i < 4; i++) _mm512_storeu_ps(acc[r0 + r] + d0 + 16 * i, c[r][i]);
        }
}
#endif

#endif
