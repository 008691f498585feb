/* Paged attention for CPU: each sequence's new queries attend over its cached keys/values, read
 * straight from the cache blocks (no gather copy), with a block-wise online softmax.
 *
 * One work unit = (sequence, kv head, tile of query positions); the unit's query rows are the
 * `group` query heads sharing that kv head times the tile's positions, so every key and value row
 * is loaded once per unit. Units run in parallel with OpenMP (torch's own libgomp, which is already
 * loaded in the process when this library is opened).
 *
 * Same contract as stencil/kernels/reference.py:paged_attention. Cache strides are in elements
 * (block, slot, head; the last dimension must be contiguous); q is float32 [T, H, D] with its heads
 * contiguous and `q_stride` elements between tokens (a view into the qkv projection); out is
 * contiguous [T, H, D] float32. Built and loaded by stencil/kernels/cpu_attention.py.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

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
#define MAX_BLOCK 64

/* Row `slot` of a cache block as float32 (a pointer into the cache, or into `tmp` for bf16). */
static inline const float *cache_row(const void *cache, int bf16, int64_t off, int dim, float *tmp) {
    if (!bf16) return (const float *)cache + off;
    const uint16_t *src = (const uint16_t *)cache + off;
    for (int d = 0; d < dim; d++) tmp[d] = bf16_to_f32(src[d]);
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

/* dot4 for bf16 keys read in place: AVX512-BF16 pair dot products, fp32 accumulation. */
static inline void dot4_bf16(const uint16_t (*qb)[MAX_DIM], int rows, const uint16_t *const k[4],
                             int dim, float *out, int stride) {
    for (int r = 0; r < rows; r++) {
        __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        for (int d = 0; d < dim; d += 32) {
            __m512bh q = (__m512bh)_mm512_loadu_si512(qb[r] + d);
            s0 = _mm512_dpbf16_ps(s0, q, (__m512bh)_mm512_loadu_si512(k[0] + d));
            s1 = _mm512_dpbf16_ps(s1, q, (__m512bh)_mm512_loadu_si512(k[1] + d));
            s2 = _mm512_dpbf16_ps(s2, q, (__m512bh)_mm512_loadu_si512(k[2] + d));
            s3 = _mm512_dpbf16_ps(s3, q, (__m512bh)_mm512_loadu_si512(k[3] + d));
        }
        _mm_storeu_ps(out + (int64_t)r * stride, hsum4(s0, s1, s2, s3));
    }
}
#endif

#ifdef HAVE_AVX512
/* acc[r] += sum_j p[r][j] * v_j over a block's nk keys, 4 rows x 64 dims of accumulators held in
 * registers across the keys (dim a multiple of 64; rows padded to a multiple of 4 by the caller,
 * the padding rows' p all zero). Each value chunk is loaded once per 4 rows, where the row-by-row
 * loop loaded and stored the accumulator once per key. */
static inline void accumulate_v(float (*acc)[MAX_DIM], float (*p)[MAX_BLOCK], int rows,
                                const float *const *vrow, int nk, int dim) {
    for (int r0 = 0; r0 < rows; r0 += 4)
        for (int d0 = 0; d0 < dim; d0 += 64) {
            __m512 c[4][4];
            for (int r = 0; r < 4; r++)
                for (int i = 0; i < 4; i++) c[r][i] = _mm512_loadu_ps(acc[r0 + r] + d0 + 16 * i);
            for (int j = 0; j < nk; j++) {
                __m512 v[4];
                for (int i = 0; i < 4; i++) v[i] = _mm512_loadu_ps(vrow[j] + d0 + 16 * i);
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

typedef struct {
    const float *q;
    int64_t q_stride;
    const void *k, *v;
    int bf16;
    int64_t sb, ss, sh;
    const int32_t *tables;
    int width;
    const int32_t *cu_q, *ctx;
    int heads, kv_heads, dim, block_size, window;
    float scale;
    float *out;
} Args;

/* Rows of a unit: row r = (position p0 + r / group, query head h * group + r % group). */
static void unit(const Args *a, int b, int h, int p0, int np) {
    int group = a->heads / a->kv_heads, rows = group * np, dim = a->dim;
    int q_len = a->cu_q[b + 1] - a->cu_q[b], ctx = a->ctx[b];
    float acc[MAX_ROWS][MAX_DIM], m[MAX_ROWS], l[MAX_ROWS], s[MAX_ROWS][MAX_BLOCK];
    float ktmp[MAX_DIM], vtmp[MAX_DIM], ktmp4[4][MAX_DIM];
#ifdef HAVE_AVX512
    float vtmp_block[MAX_BLOCK][MAX_DIM];  /* a bf16 block's values as float32 */
#endif
    const float *qrow[MAX_ROWS];
    int qpos[MAX_ROWS];
    for (int r = 0; r < rows; r++) {
        int p = p0 + r / group, head = h * group + r % group;
        qrow[r] = a->q + (int64_t)(a->cu_q[b] + p) * a->q_stride + (int64_t)head * dim;
        qpos[r] = ctx - q_len + p;
        m[r] = -INFINITY;
        l[r] = 0.f;
        memset(acc[r], 0, sizeof(float) * dim);
    }
    /* rows padded to a multiple of 4 for the 4-row kernels: copies of row 0, results unused */
    int padded = (rows + 3) & ~3;
    for (int r = rows; r < padded; r++) {
        qrow[r] = qrow[0];
        memset(acc[r], 0, sizeof(float) * dim);
    }
#ifdef HAVE_AVX512_BF16
    uint16_t qb[MAX_ROWS][MAX_DIM];
    int bf16_dots = a->bf16 && dim % 32 == 0;
    if (bf16_dots)
        for (int r = 0; r < rows; r++) to_bf16(qrow[r], dim, qb[r]);
#endif
    int hi = qpos[rows - 1] + 1, lo = 0;
    if (a->window > 0 && qpos[0] - a->window + 1 > 0) lo = qpos[0] - a->window + 1;
    const int32_t *table = a->tables + (int64_t)b * a->width;
    for (int start = lo - lo % a->block_size; start < hi; start += a->block_size) {
        int64_t base = (int64_t)table[start / a->block_size] * a->sb + (int64_t)h * a->sh;
        int k0 = start < lo ? lo : start, k1 = start + a->block_size < hi ? start + a->block_size : hi;
        int j = k0;
#ifdef HAVE_AVX512_BF16
        for (; bf16_dots && j + 4 <= k1; j += 4) {
            const uint16_t *k4[4];
            for (int i = 0; i < 4; i++)
                k4[i] = (const uint16_t *)a->k + base + (int64_t)(j + i - start) * a->ss;
            dot4_bf16((const uint16_t (*)[MAX_DIM])qb, rows, k4, dim, &s[0][j - k0], MAX_BLOCK);
        }
#endif
#ifdef HAVE_AVX512
        for (; dim % 16 == 0 && j + 4 <= k1; j += 4) {
            const float *k4[4];
            for (int i = 0; i < 4; i++)
                k4[i] = cache_row(a->k, a->bf16, base + (int64_t)(j + i - start) * a->ss, dim, ktmp4[i]);
            dot4(qrow, padded, k4, dim, &s[0][j - k0], MAX_BLOCK);
        }
#endif
        for (; j < k1; j++) {
            const float *krow = cache_row(a->k, a->bf16, base + (int64_t)(j - start) * a->ss, dim, ktmp);
            for (int r = 0; r < rows; r++) s[r][j - k0] = dot(qrow[r], krow, dim);
        }
        for (int r = 0; r < rows; r++)
            for (int i = 0; i < k1 - k0; i++) {
                int key = k0 + i;
                int visible = key <= qpos[r] && (a->window <= 0 || key > qpos[r] - a->window);
                s[r][i] = visible ? s[r][i] * a->scale : -INFINITY;
            }
        int nk = k1 - k0;
        for (int r = 0; r < rows; r++) {
            float mx = m[r], sum = 0.f;
#pragma omp simd reduction(max : mx)
            for (int j = 0; j < nk; j++) mx = s[r][j] > mx ? s[r][j] : mx;
            if (mx == -INFINITY) continue;
            float corr = expf(m[r] - mx);
#pragma omp simd
            for (int d = 0; d < dim; d++) acc[r][d] *= corr;
#pragma omp simd reduction(+ : sum)
            for (int j = 0; j < nk; j++) {
                s[r][j] = exp_approx(s[r][j] - mx);
                sum += s[r][j];
            }
            l[r] = l[r] * corr + sum;
            m[r] = mx;
        }
#ifdef HAVE_AVX512
        if (dim % 64 == 0) {
            for (int r = 0; r < padded; r++)  /* rows not yet seeing a key, and padding: p = 0 */
                if (r >= rows || m[r] == -INFINITY) memset(s[r], 0, sizeof(float) * nk);
            const float *vrows[MAX_BLOCK];
            for (int j = k0; j < k1; j++)
                vrows[j - k0] = cache_row(a->v, a->bf16, base + (int64_t)(j - start) * a->ss, dim,
                                          vtmp_block[j - k0]);
            accumulate_v(acc, s, padded, vrows, nk, dim);
            continue;
        }
#endif
        for (int j = k0; j < k1; j++) {
            const float *vrow = cache_row(a->v, a->bf16, base + (int64_t)(j - start) * a->ss, dim, vtmp);
            for (int r = 0; r < rows; r++) {
                float p = m[r] == -INFINITY ? 0.f : s[r][j - k0];
                if (p == 0.f) continue;
#pragma omp simd
                for (int d = 0; d < dim; d++) acc[r][d] += p * vrow[d];
            }
        }
    }
    for (int r = 0; r < rows; r++) {
        int p = p0 + r / group, head = h * group + r % group;
        float *o = a->out + ((int64_t)(a->cu_q[b] + p) * a->heads + head) * dim;
        float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
        for (int d = 0; d < dim; d++) o[d] = acc[r][d] * inv;
    }
}

/* `units`: [num_units, 4] int32 rows (sequence, kv head, first position, positions), planned by
 * the caller; each unit has at most MAX_ROWS query rows. */
void paged_attention(const float *q, int64_t q_stride, const void *k, const void *v, int bf16,
                     int64_t sb, int64_t ss, int64_t sh, const int32_t *tables, int width,
                     const int32_t *cu_q, const int32_t *ctx, const int32_t *units, int num_units,
                     int heads, int kv_heads, int dim, int block_size, float scale, int window,
                     float *out, int threads) {
    Args a = {q,    q_stride, k,   v,        bf16, sb,         ss,     sh,    tables, width,
              cu_q, ctx,      heads, kv_heads, dim, block_size, window, scale, out};
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int u = 0; u < num_units; u++) {
        const int32_t *w = units + 4 * u;
        unit(&a, w[0], w[1], w[2], w[3]);
    }
}
