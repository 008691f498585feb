/* Paged attention for CPU: each sequence's new queries attend over its cached keys/values, read
 * straight from the cache blocks (no gather copy), with an online softmax over chunks of up to 64
 * keys (whole blocks).
 *
 * One work unit = (sequence, kv head, tile of query positions); the unit's query rows are the
 * `group` query heads sharing that kv head times the tile's positions, so every key and value row
 * is loaded once per unit. A decode step is bound by reading the cache, so the next chunk's keys
 * are prefetched while the current ones are scored and its values while the current values are
 * summed, and each thread prefetches its next unit's first chunk. Units run in parallel with
 * OpenMP (torch's own libgomp, which is already loaded in the process when this library is
 * opened), claimed one at a time.
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
    const float *sinks; /* [heads] or NULL: a logit per head in every softmax denominator */
    float *out;
    float softcap; /* > 0 (Gemma 2): scores become softcap * tanh(scores / softcap) */
} Args;

/* Bytes of one cache row (one token's keys or values of one head). */
static inline int row_bytes(const Args *a) { return a->dim * (a->bf16 ? 2 : 4); }

/* The first key the unit's first query row sees (0, or the start of its sliding window). */
static inline int first_key(const Args *a, int b, int p0) {
    int pos = a->ctx[b] - (a->cu_q[b + 1] - a->cu_q[b]) + p0;
    return a->window > 0 && pos - a->window + 1 > 0 ? pos - a->window + 1 : 0;
}

/* Pointers to the key and value rows [k0, k1) of kv head h (blocks from `start`, a block start). */
static inline void chunk_rows(const Args *a, const int32_t *table, int h, int start, int k0, int k1,
                              const void **krow, const void **vrow) {
    int bs = a->block_size, elt = a->bf16 ? 2 : 4;
    for (int blk = start; blk < k1; blk += bs) {
        int64_t base = (int64_t)table[blk / bs] * a->sb + (int64_t)h * a->sh;
        for (int key = blk < k0 ? k0 : blk; key < blk + bs && key < k1; key++) {
            int64_t off = (base + (int64_t)(key - blk) * a->ss) * elt;
            krow[key - k0] = (const char *)a->k + off;
            vrow[key - k0] = (const char *)a->v + off;
        }
    }
}

/* Scores s[r][i] = q_r . k_i for the chunk's nk keys (rows padded to 4 where the 4-row kernels
 * run; the padding rows' scores are ignored). Where the 4-key kernels run, a short last group of
 * keys goes through them too (its last key repeated), so a key's score is the same whatever the
 * number of keys in its chunk, i.e. whatever the number of query positions in the step: a decode
 * step and a speculative verification step give the same position the same output, bit for bit. */
static void scores(const Args *a, const float *const *qrow, const uint16_t (*qb)[MAX_DIM], int rows,
                   int padded, const void *const *krow, int nk, float (*s)[MAX_CHUNK],
                   const void *const *next_k, int next_n) {
    int dim = a->dim, bytes = row_bytes(a), wide = 0;
    (void)qb;
    (void)padded;
#ifdef HAVE_AVX512
    wide = dim % 16 == 0 || qb;
#endif
    if (!wide) {
        float ktmp[MAX_DIM];
        prefetch_rows(next_k, bytes, 0, next_n);
        for (int j = 0; j < nk; j++) {
            const float *k = cache_row(krow[j], a->bf16, dim, ktmp);
            for (int r = 0; r < rows; r++) s[r][j] = dot(qrow[r], k, dim);
        }
        return;
    }
#ifdef HAVE_AVX512
    float ktmp[4][MAX_DIM], part[MAX_ROWS][4];
    for (int j = 0; j < nk; j += 4) {
        int n = nk - j < 4 ? nk - j : 4, full = n == 4;
        const void *k4[4];
        for (int i = 0; i < 4; i++) k4[i] = krow[j + (i < n ? i : n - 1)];
        prefetch_rows(next_k, bytes, j, j + 4 < next_n ? j + 4 : next_n);
        float *out = full ? &s[0][j] : &part[0][0];
        int stride = full ? MAX_CHUNK : 4;
#ifdef HAVE_AVX512_BF16
        if (qb) {
            dot4_bf16(qb, padded, (const uint16_t *const *)k4, dim, out, stride);
        } else
#endif
        {
            const float *kf[4];
            for (int i = 0; i < 4; i++) kf[i] = cache_row(k4[i], a->bf16, dim, ktmp[i]);
            dot4(qrow, padded, kf, dim, out, stride);
        }
        for (int r = 0; !full && r < rows; r++)
            for (int i = 0; i < n; i++) s[r][j + i] = part[r][i];
    }
    prefetch_rows(next_k, bytes, nk, next_n);
#endif
}

/* Rows of a unit: row r = (position p0 + r / group, query head h * group + r % group). The keys
 * are taken a chunk of whole blocks (up to MAX_CHUNK keys) at a time: one online-softmax update
 * per chunk and row. */
static void unit(const Args *a, int b, int h, int p0, int np) {
    int group = a->heads / a->kv_heads, rows = group * np, dim = a->dim, bs = a->block_size;
    int q_len = a->cu_q[b + 1] - a->cu_q[b], ctx = a->ctx[b];
    float acc[MAX_ROWS][MAX_DIM], m[MAX_ROWS], l[MAX_ROWS], s[MAX_ROWS][MAX_CHUNK];
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
    uint16_t (*qb)[MAX_DIM] = NULL;
#ifdef HAVE_AVX512_BF16
    uint16_t qbuf[MAX_ROWS][MAX_DIM];
    if (a->bf16 && dim % 32 == 0) {
        qb = qbuf;
        for (int r = 0; r < padded; r++) to_bf16(qrow[r], dim, qb[r]);
    }
#endif
    int hi = qpos[rows - 1] + 1, lo = first_key(a, b, p0), chunk = MAX_CHUNK / bs * bs;
    const int32_t *table = a->tables + (int64_t)b * a->width;
    const void *rows_k[2][MAX_CHUNK], *rows_v[2][MAX_CHUNK];
    int cur = 0, start = lo - lo % chunk; /* chunks at multiples of `chunk`: the same in any step */
    chunk_rows(a, table, h, start, lo, start + chunk < hi ? start + chunk : hi, rows_k[0], rows_v[0]);
    for (; start < hi; start += chunk, cur ^= 1) {
        int k0 = start < lo ? lo : start, k1 = start + chunk < hi ? start + chunk : hi, nk = k1 - k0;
        const void *const *krow = rows_k[cur], *const *vrow = rows_v[cur];
        int next_n = 0;  /* the next chunk's rows: known now, prefetched while this one is scored */
        if (k1 < hi) {
            int next_end = k1 + chunk < hi ? k1 + chunk : hi;
            chunk_rows(a, table, h, k1, k1, next_end, rows_k[cur ^ 1], rows_v[cur ^ 1]);
            next_n = next_end - k1;
        }
        scores(a, qrow, (const uint16_t (*)[MAX_DIM])qb, rows, padded, krow, nk, s, rows_k[cur ^ 1],
               next_n);
        /* rows are in position order: every key of the chunk is visible to every row when the
         * last key precedes the first row and the window reaches back to the first key */
        int all_visible = k1 - 1 <= qpos[0] && (a->window <= 0 || k0 > qpos[rows - 1] - a->window);
        for (int r = 0; r < rows; r++) {
            float mx = m[r], sum = 0.f;
            if (a->softcap > 0.f) { /* before the mask, as the reference */
                const float cap = a->softcap;
                for (int i = 0; i < nk; i++) s[r][i] = cap * tanhf(s[r][i] * a->scale / cap);
                for (int i = 0; !all_visible && i < nk; i++) {
                    int key = k0 + i;
                    int visible = key <= qpos[r] && (a->window <= 0 || key > qpos[r] - a->window);
                    if (!visible) s[r][i] = -INFINITY;
                }
            } else if (all_visible) {
#pragma omp simd
                for (int i = 0; i < nk; i++) s[r][i] *= a->scale;
            } else {
                for (int i = 0; i < nk; i++) {
                    int key = k0 + i;
                    int visible = key <= qpos[r] && (a->window <= 0 || key > qpos[r] - a->window);
                    s[r][i] = visible ? s[r][i] * a->scale : -INFINITY;
                }
            }
#pragma omp simd reduction(max : mx)
            for (int i = 0; i < nk; i++) mx = s[r][i] > mx ? s[r][i] : mx;
            if (mx == -INFINITY) continue;
            if (mx > m[r]) {
                float corr = expf(m[r] - mx);
#pragma omp simd
                for (int d = 0; d < dim; d++) acc[r][d] *= corr;
                l[r] *= corr;
                m[r] = mx;
            }
            /* the exps summed from the first key this row sees: the same sum in any step (keys
             * it does not see add exact zeros after those it does) */
            sum = exp_row(s[r], nk, mx);
            int vlo = a->window > 0 ? qpos[r] - a->window + 1 - k0 : 0;
            if (vlo > 0) {
                int vhi = qpos[r] + 1 - k0 < nk ? qpos[r] + 1 - k0 : nk;
                sum = vhi > vlo ? sum_row(s[r] + vlo, vhi - vlo) : 0.f;
            }
            l[r] += sum;
        }
        const void *const *next_v = rows_v[cur ^ 1];  /* prefetched while this chunk's are summed */
#ifdef HAVE_AVX512
        if (dim % 64 == 0) {
            for (int r = 0; r < padded; r++)  /* rows not yet seeing a key, and padding: p = 0 */
                if (r >= rows || m[r] == -INFINITY) memset(s[r], 0, sizeof(float) * nk);
            accumulate_v(acc, s, padded, vrow, a->bf16, nk, dim, next_v, next_n);
        } else
#endif
        {
            float vtmp[MAX_DIM];
            for (int i = 0; i < nk; i++) {
                if (i < next_n) prefetch_rows(next_v, row_bytes(a), i, i + 1);
                const float *v = cache_row(vrow[i], a->bf16, dim, vtmp);
                for (int r = 0; r < rows; r++) {
                    float p = m[r] == -INFINITY ? 0.f : s[r][i];
                    if (p == 0.f) continue;
#pragma omp simd
                    for (int d = 0; d < dim; d++) acc[r][d] += p * v[d];
                }
            }
        }
        prefetch_rows(next_v, row_bytes(a), nk, next_n);  /* a next chunk longer than this one */
    }
    for (int r = 0; r < rows; r++) {
        int p = p0 + r / group, head = h * group + r % group;
        float *o = a->out + ((int64_t)(a->cu_q[b] + p) * a->heads + head) * dim;
        if (a->sinks && m[r] != -INFINITY) { /* the sink joins the denominator, adds no value */
            float sink = a->sinks[head], mx = sink > m[r] ? sink : m[r], corr = expf(m[r] - mx);
            for (int d = 0; d < dim; d++) acc[r][d] *= corr;
            l[r] = l[r] * corr + expf(sink - mx);
        }
        float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
        for (int d = 0; d < dim; d++) o[d] = acc[r][d] * inv;
    }
}

/* Prefetch the first chunk a unit reads. */
static inline void prefetch_unit(const Args *a, const int32_t *w) {
    int b = w[0], lo = first_key(a, b, w[2]), bs = a->block_size, chunk = MAX_CHUNK / bs * bs;
    int first = lo - lo % chunk;
    int hi = a->ctx[b] - (a->cu_q[b + 1] - a->cu_q[b]) + w[2] + w[3];
    int end = first + chunk, to = end < hi ? end : hi;
    const void *k[MAX_CHUNK], *v[MAX_CHUNK];
    chunk_rows(a, a->tables + (int64_t)b * a->width, w[1], first, lo, to, k, v);
    prefetch_rows(k, row_bytes(a), 0, to - lo);
    prefetch_rows(v, row_bytes(a), 0, to - lo);
}

/* `units`: [num_units, 4] int32 rows (sequence, kv head, first position, positions), planned by
 * the caller; each unit has at most MAX_ROWS query rows. */
void paged_attention(const float *q, int64_t q_stride, const void *k, const void *v, int bf16,
                     int64_t sb, int64_t ss, int64_t sh, const int32_t *tables, int width,
                     const int32_t *cu_q, const int32_t *ctx, const int32_t *units, int num_units,
                     int heads, int kv_heads, int dim, int block_size, float scale, int window,
                     const float *sinks, float *out, int threads, float softcap) {
    Args a = {q,    q_stride, k,     v,        bf16, sb,         ss,     sh,    tables, width,
              cu_q, ctx,      heads, kv_heads, dim, block_size, window, scale, sinks, out,
              softcap};
    /* dynamic scheduling, one unit at a time, each thread claiming its next unit before it runs
     * the current one so that the next unit's first block is on its way meanwhile */
    int next = 0;
#pragma omp parallel num_threads(threads)
    {
        int u = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED);
        if (u < num_units) prefetch_unit(&a, units + 4 * u);
        while (u < num_units) {
            int after = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED);
            if (after < num_units) prefetch_unit(&a, units + 4 * after);
            const int32_t *w = units + 4 * u;
            unit(&a, w[0], w[1], w[2], w[3]);
            u = after;
        }
    }
}
