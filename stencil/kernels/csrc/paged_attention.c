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

#include <stdlib.h>

#include "attention_simd.h"

#define KEY_RANGE 128 /* keys per independent softmax state, a multiple of 64: see merge() */
#define UNIT 6        /* int32 columns of a work unit */

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

/* Pointers to the key and value rows [k0, k1) of kv head h. */
static inline void chunk_rows(const Args *a, const int32_t *table, int h, int k0, int k1,
                              const void **krow, const void **vrow) {
    int bs = a->block_size, elt = a->bf16 ? 2 : 4;
    for (int blk = k0 - k0 % bs; blk < k1; blk += bs) {
        int64_t base = (int64_t)table[blk / bs] * a->sb + (int64_t)h * a->sh;
        for (int key = blk < k0 ? k0 : blk; key < blk + bs && key < k1; key++) {
            int64_t off = (base + (int64_t)(key - blk) * a->ss) * elt;
            krow[key - k0] = (const char *)a->k + off;
            vrow[key - k0] = (const char *)a->v + off;
        }
    }
}

/* Keys are taken in chunks of whole blocks (up to MAX_CHUNK keys, one online-softmax update per
 * chunk and row) from multiples of `chunk`, cut where a KEY_RANGE starts (see merge()):
 * boundaries at fixed key indices, the same in any step. The end of the chunk from key x, where
 * g is the multiple of `chunk` at or before x (kept by the caller: no division per chunk). */
static inline int chunk_end(int x, int g, int chunk) {
    int c = g + chunk, r = (x & -KEY_RANGE) + KEY_RANGE;
    return c < r ? c : r;
}

/* A unit's key span [lo, hi): from the first key its first row sees to its last row's position,
 * cut to key range `range` where that is >= 0. */
static inline void span(const Args *a, const int32_t *w, int range, int *lo, int *hi) {
    int b = w[0];
    *lo = first_key(a, b, w[2]);
    *hi = a->ctx[b] - (a->cu_q[b + 1] - a->cu_q[b]) + w[2] + w[3];
    if (range >= 0) {
        int r0 = range * KEY_RANGE, r1 = r0 + KEY_RANGE;
        *lo = *lo > r0 ? *lo : r0;
        *hi = *hi < r1 ? *hi : r1;
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

/* A softmax state per row: running max m, denominator l and unnormalized output acc (row r's at
 * acc + r * stride). */
typedef struct {
    float *m, *l, *acc;
    int stride;
} State;

/* run <- run merged with part, row by row: the state over a row's keys so far, then the state of
 * its next KEY_RANGE keys computed from scratch. A row's keys are split at fixed multiples of
 * KEY_RANGE and the ranges merged in order, one at a time, whether one unit runs them all (merging
 * as it goes) or one unit per range runs on each thread and the ranges are merged after (a step
 * with too few units for the threads: one sequence's keys shared between the cores). Not inlined,
 * so both run the same instructions: a row's output is the same bit for bit either way. */
static __attribute__((noinline)) void merge(State run, State part, int rows, int dim) {
    for (int r = 0; r < rows; r++) {
        float pm = part.m[r], rm = run.m[r], *ra = run.acc + (int64_t)r * run.stride;
        const float *pa = part.acc + (int64_t)r * part.stride;
        if (pm == -INFINITY) continue; /* the row sees no key of the range */
        if (rm == -INFINITY) {
            memcpy(ra, pa, sizeof(float) * dim);
            run.m[r] = pm, run.l[r] = part.l[r];
            continue;
        }
        float mx = pm > rm ? pm : rm, c0 = expf(rm - mx), c1 = expf(pm - mx);
        for (int d = 0; d < dim; d++) ra[d] = fmaf(pa[d], c1, ra[d] * c0);
        run.l[r] = fmaf(part.l[r], c1, run.l[r] * c0);
        run.m[r] = mx;
    }
}

/* An empty state: no key seen. */
static void reset(State st, int rows, int dim) {
    for (int r = 0; r < rows; r++) {
        st.m[r] = -INFINITY, st.l[r] = 0.f;
        memset(st.acc + (int64_t)r * st.stride, 0, sizeof(float) * dim);
    }
}

/* The unit's outputs acc / l, the sinks joining the denominators. */
static __attribute__((noinline)) void finish(const Args *a, const int32_t *w, State st) {
    int group = a->heads / a->kv_heads, rows = group * w[3], dim = a->dim;
    for (int r = 0; r < rows; r++) {
        int p = w[2] + r / group, head = w[1] * group + r % group;
        float *o = a->out + ((int64_t)(a->cu_q[w[0]] + p) * a->heads + head) * dim;
        float m = st.m[r], l = st.l[r], *acc = st.acc + (int64_t)r * st.stride;
        if (a->sinks && m != -INFINITY) { /* the sink joins the denominator, adds no value */
            float sink = a->sinks[head], mx = sink > m ? sink : m, corr = expf(m - mx);
            for (int d = 0; d < dim; d++) acc[d] *= corr;
            l = l * corr + expf(sink - mx);
        }
        float inv = l > 0.f ? 1.f / l : 0.f;
        for (int d = 0; d < dim; d++) o[d] = acc[d] * inv;
    }
}

/* Key range `range`'s states of a split unit's rows in the work buffer: m [rows], l [rows],
 * acc [rows, dim] per range, the unit's ranges one after another from offset w[5]. */
static inline State partial(const Args *a, const int32_t *w, float *work, int range) {
    int rows = a->heads / a->kv_heads * w[3];
    float *p = work + w[5] + (int64_t)range * rows * (a->dim + 2);
    return (State){p, p + rows, p + 2 * rows, a->dim};
}

/* The key range unit w runs: its own; -1 (every key) or -2 (none) for a split unit without a
 * work buffer. */
static inline int key_range(const int32_t *w, const float *work) {
    return w[4] < 0 || work ? w[4] : (w[4] == 0 ? -1 : -2);
}

/* Rows of a unit: row r = (position p0 + r / group, query head h * group + r % group). Unit w
 * = (sequence, kv head, first position, positions, key range, work offset): key range -1 runs
 * every key and writes the outputs; a key range >= 0 runs that range's keys only and leaves its
 * state in the work buffer (where there is none, range 0 runs every key and the others none). */
static void unit(const Args *a, const int32_t *w, float *work) {
    int b = w[0], h = w[1], p0 = w[2], np = w[3], range = key_range(w, work);
    if (range == -2) return;
    int group = a->heads / a->kv_heads, rows = group * np, dim = a->dim, bs = a->block_size;
    int q_len = a->cu_q[b + 1] - a->cu_q[b], ctx = a->ctx[b];
    float acc[MAX_ROWS][MAX_DIM], m[MAX_ROWS], l[MAX_ROWS], s[MAX_ROWS][MAX_CHUNK];
    float run_acc[MAX_ROWS][MAX_DIM], run_m[MAX_ROWS], run_l[MAX_ROWS];
    State part = {m, l, &acc[0][0], MAX_DIM}, run = {run_m, run_l, &run_acc[0][0], MAX_DIM};
    const float *qrow[MAX_ROWS];
    int qpos[MAX_ROWS];
    for (int r = 0; r < rows; r++) {
        int p = p0 + r / group, head = h * group + r % group;
        qrow[r] = a->q + (int64_t)(a->cu_q[b] + p) * a->q_stride + (int64_t)head * dim;
        qpos[r] = ctx - q_len + p;
    }
    /* rows padded to a multiple of 4 for the 4-row kernels: copies of row 0, results unused */
    int padded = (rows + 3) & ~3;
    for (int r = rows; r < padded; r++) qrow[r] = qrow[0];
    reset(part, padded, dim);
    if (range < 0) reset(run, rows, dim);
    uint16_t (*qb)[MAX_DIM] = NULL;
#ifdef HAVE_AVX512_BF16
    uint16_t qbuf[MAX_ROWS][MAX_DIM];
    if (a->bf16 && dim % 32 == 0) {
        qb = qbuf;
        for (int r = 0; r < padded; r++) to_bf16(qrow[r], dim, qb[r]);
    }
#endif
    int lo, hi, chunk = MAX_CHUNK / bs * bs;
    span(a, w, range, &lo, &hi);
    const int32_t *table = a->tables + (int64_t)b * a->width;
    const void *rows_k[2][MAX_CHUNK], *rows_v[2][MAX_CHUNK];
    int g = lo - lo % chunk, first = g > (lo & -KEY_RANGE) ? g : (lo & -KEY_RANGE);
    int cur = 0, end = chunk_end(lo, g, chunk);
    chunk_rows(a, table, h, lo, end < hi ? end : hi, rows_k[0], rows_v[0]);
    for (int start = first; start < hi; start = end, cur ^= 1) {
        end = chunk_end(start, g, chunk);
        g = end == g + chunk ? end : g; /* the grid point at or before the next chunk */
        int k0 = start < lo ? lo : start, k1 = end < hi ? end : hi, nk = k1 - k0;
        if (start % KEY_RANGE == 0 && start > first) { /* a new key range, a new state */
            merge(run, part, rows, dim);
            reset(part, rows, dim);
        }
        const void *const *krow = rows_k[cur], *const *vrow = rows_v[cur];
        int next_n = 0;  /* the next chunk's rows: known now, prefetched while this one is scored */
        if (k1 < hi) {
            int next_end = chunk_end(k1, g, chunk) < hi ? chunk_end(k1, g, chunk) : hi;
            chunk_rows(a, table, h, k1, next_end, rows_k[cur ^ 1], rows_v[cur ^ 1]);
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
    if (range >= 0) { /* this range's state, for merge_unit */
        State out = partial(a, w, work, range);
        for (int r = 0; r < rows; r++) {
            out.m[r] = m[r], out.l[r] = l[r];
            memcpy(out.acc + (int64_t)r * dim, acc[r], sizeof(float) * dim);
        }
        return;
    }
    merge(run, part, rows, dim);
    finish(a, w, run);
}

/* A split unit's outputs: its key ranges' states merged in order (w: the unit of range 0). */
static void merge_unit(const Args *a, const int32_t *w, float *work) {
    int rows = a->heads / a->kv_heads * w[3], lo, hi;
    float acc[MAX_ROWS][MAX_DIM], m[MAX_ROWS], l[MAX_ROWS];
    State run = {m, l, &acc[0][0], MAX_DIM};
    reset(run, rows, a->dim);
    span(a, w, -1, &lo, &hi);
    for (int range = 0; range * KEY_RANGE < hi; range++)
        merge(run, partial(a, w, work, range), rows, a->dim);
    finish(a, w, run);
}

/* Prefetch the first chunk a unit reads. */
static inline void prefetch_unit(const Args *a, const int32_t *w, const float *work) {
    int lo, hi, range = key_range(w, work), chunk = MAX_CHUNK / a->block_size * a->block_size;
    if (range == -2) return;
    span(a, w, range, &lo, &hi);
    int end = chunk_end(lo, lo - lo % chunk, chunk), to = end < hi ? end : hi;
    const void *k[MAX_CHUNK], *v[MAX_CHUNK];
    chunk_rows(a, a->tables + (int64_t)w[0] * a->width, w[1], lo, to, k, v);
    prefetch_rows(k, row_bytes(a), 0, to - lo);
    prefetch_rows(v, row_bytes(a), 0, to - lo);
}

/* `units`: [num_units, UNIT] int32 rows (see unit()), planned by the caller; each unit has at most
 * MAX_ROWS query rows; the units of one split unit, one per key range from 0 up, share a work
 * offset (the caller's sum of the floats they need before it). */
void paged_attention(const float *q, int64_t q_stride, const void *k, const void *v, int bf16,
                     int64_t sb, int64_t ss, int64_t sh, const int32_t *tables, int width,
                     const int32_t *cu_q, const int32_t *ctx, const int32_t *units, int num_units,
                     int heads, int kv_heads, int dim, int block_size, float scale, int window,
                     const float *sinks, float *out, int threads, float softcap) {
    Args a = {q,    q_stride, k,     v,        bf16, sb,         ss,     sh,    tables, width,
              cu_q, ctx,      heads, kv_heads, dim, block_size, window, scale, sinks, out,
              softcap};
    int64_t size = 0; /* floats of the split units' range states */
    for (int u = 0; u < num_units; u++) {
        const int32_t *w = units + UNIT * u;
        int64_t end = w[5] + (int64_t)(w[4] + 1) * (heads / kv_heads * w[3]) * (dim + 2);
        if (w[4] >= 0 && end > size) size = end;
    }
    float *work = size ? malloc(sizeof(float) * size) : NULL;
    /* dynamic scheduling, one unit at a time, each thread claiming its next unit before it runs
     * the current one so that the next unit's first block is on its way meanwhile */
    int next = 0;
#pragma omp parallel num_threads(threads)
    {
        int u = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED);
        if (u < num_units) prefetch_unit(&a, units + UNIT * u, work);
        while (u < num_units) {
            int after = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED);
            if (after < num_units) prefetch_unit(&a, units + UNIT * after, work);
            unit(&a, units + UNIT * u, work);
            u = after;
        }
        if (work) {
#pragma omp barrier
#pragma omp for schedule(dynamic)
            for (int i = 0; i < num_units; i++)
                if (units[UNIT * i + 4] == 0) merge_unit(&a, units + UNIT * i, work);
        }
    }
    free(work);
}
