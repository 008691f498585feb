/* The per-layer elementwise work of a decoder layer, fused: RMSNorm (with the residual add),
 * neox-style rotary embedding, SiLU-and-mul, and the KV-cache write. vLLM's names and semantics.
 *
 * Every op walks rows (a token, or a (token, head) pair) given by their strides in elements; the
 * last dimension is contiguous. Tensors are float32 (bf16 = 0) or bfloat16 (bf16 = 1); bfloat16
 * math runs in float32 and rounds to bfloat16 (nearest even) exactly where the torch twins in
 * stencil/kernels/reference.py round, so both paths give the same bits up to summation order.
 * Rows are split over OpenMP threads only when a call holds at least `PAR_MIN` elements: the rows
 * of a decode step are too few to pay for waking the threads.
 *
 * Built and loaded by stencil/kernels/cpu_layer_ops.py.
 */
#include <string.h>

#include "cpu_math.h"

#define PAR_MIN (1 << 16)

/* What torch's bfloat16 arithmetic does to a float32 result: round it to bfloat16. */
static inline float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

/* out = weight * rmsnorm(x) on one row (out may alias x): as reference.rms_norm, the normalised
 * row is rounded to the tensor's dtype before the weight multiplies it. */
static void norm_row(void *out, const void *x, const void *w, int dim, float eps, int bf16) {
    float ss = 0.f;
    if (bf16) {
#pragma omp simd reduction(+ : ss)
        for (int d = 0; d < dim; d++) {
            float v = bf16_to_f32(((const uint16_t *)x)[d]);
            ss += v * v;
        }
        float r = 1.f / sqrtf(ss / (float)dim + eps);
        const uint16_t *xs = x, *ws = w;
        uint16_t *o = out;
#pragma omp simd
        for (int d = 0; d < dim; d++)
            o[d] = f32_to_bf16(bf16_to_f32(ws[d]) * round_bf16(bf16_to_f32(xs[d]) * r));
    } else {
        const float *xs = x, *ws = w;
        float *o = out;
#pragma omp simd reduction(+ : ss)
        for (int d = 0; d < dim; d++) ss += xs[d] * xs[d];
        float r = 1.f / sqrtf(ss / (float)dim + eps);
#pragma omp simd
        for (int d = 0; d < dim; d++) o[d] = ws[d] * (xs[d] * r);
    }
}

/* Rows are (i0, i1) for i0 < n0, i1 < n1; row (i0, i1) starts at i0 * s0 + i1 * s1. */
void rms_norm(void *out, int64_t os0, int64_t os1, const void *x, int64_t xs0, int64_t xs1,
              const void *weight, int64_t n0, int64_t n1, int dim, float eps, int bf16,
              int nthreads) {
    int64_t es = bf16 ? 2 : 4, rows = n0 * n1;
#pragma omp parallel for schedule(static) num_threads(nthreads) if (rows * dim >= PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        int64_t a = i / n1, b = i % n1;
        norm_row((char *)out + (a * os0 + b * os1) * es, (const char *)x + (a * xs0 + b * xs1) * es,
                 weight, dim, eps, bf16);
    }
}

/* residual += x; x = weight * rmsnorm(residual), both in place, row by row. */
void fused_add_rms_norm(void *x, int64_t xs, void *residual, int64_t rs, const void *weight,
                        int64_t rows, int dim, float eps, int bf16, int nthreads) {
    int64_t es = bf16 ? 2 : 4;
#pragma omp parallel for schedule(static) num_threads(nthreads) if (rows * dim >= PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        void *xr = (char *)x + i * xs * es, *rr = (char *)residual + i * rs * es;
        if (bf16) {
            uint16_t *a = xr, *r = rr;
#pragma omp simd
            for (int d = 0; d < dim; d++) r[d] = f32_to_bf16(bf16_to_f32(r[d]) + bf16_to_f32(a[d]));
        } else {
            float *a = xr, *r = rr;
#pragma omp simd
            for (int d = 0; d < dim; d++) r[d] += a[d];
        }
        norm_row(xr, rr, weight, dim, eps, bf16);
    }
}

/* One head's rotation in place: x1, x2 = halves; x1' = x1 c - x2 s, x2' = x2 c + x1 s, each
 * product and sum rounded like torch's bfloat16 ops (cos and sin rounded to bfloat16 first). */
static void rotate_head(void *x, const float *cs, int half, int bf16) {
    if (bf16) {
        uint16_t *v = x;
#pragma omp simd
        for (int i = 0; i < half; i++) {
            float c = round_bf16(cs[i]), s = round_bf16(cs[half + i]);
            float x1 = bf16_to_f32(v[i]), x2 = bf16_to_f32(v[half + i]);
            v[i] = f32_to_bf16(round_bf16(x1 * c) - round_bf16(x2 * s));
            v[half + i] = f32_to_bf16(round_bf16(x2 * c) + round_bf16(x1 * s));
        }
    } else {
        float *v = x;
#pragma omp simd
        for (int i = 0; i < half; i++) {
            float c = cs[i], s = cs[half + i], x1 = v[i], x2 = v[half + i];
            v[i] = x1 * c - x2 * s;
            v[half + i] = x2 * c + x1 * s;
        }
    }
}

/* q [T, q_heads, dim] and k [T, k_heads, dim] (strides per token and head) rotated in place by
 * the rows `cos_sin[positions[t]]` = [cos(dim / 2) | sin(dim / 2)] (float32). Returns the number
 * of positions outside [0, max_pos) (those tokens are left as they are). */
int64_t rotary_embedding(const int64_t *positions, int64_t tokens, void *q, int64_t qs0,
                         int64_t qs1, int q_heads, void *k, int64_t ks0, int64_t ks1, int k_heads,
                         const float *cos_sin, int64_t max_pos, int dim, int bf16, int nthreads) {
    int64_t es = bf16 ? 2 : 4, bad = 0;
    int half = dim / 2;
#pragma omp parallel for schedule(static) num_threads(nthreads) reduction(+ : bad) \
    if (tokens * (q_heads + k_heads) * dim >= PAR_MIN)
    for (int64_t t = 0; t < tokens; t++) {
        int64_t p = positions[t];
        if (p < 0 || p >= max_pos) {
            bad++;
            continue;
        }
        const float *cs = cos_sin + p * dim;
        for (int h = 0; h < q_heads; h++)
            rotate_head((char *)q + (t * qs0 + h * qs1) * es, cs, half, bf16);
        for (int h = 0; h < k_heads; h++)
            rotate_head((char *)k + (t * ks0 + h * ks1) * es, cs, half, bf16);
    }
    return bad;
}

/* out [rows, d] = silu(gate_up[:, :d]) * gate_up[:, d:]; the SiLU is rounded to the dtype before
 * the product, as F.silu(gate) * up rounds it. */
void silu_and_mul(void *out, int64_t os, const void *gate_up, int64_t gs, int64_t rows, int d,
                  int bf16, int nthreads) {
#pragma omp parallel for schedule(static) num_threads(nthreads) if (rows * d >= PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        if (bf16) {
            const uint16_t *g = (const uint16_t *)gate_up + i * gs;
            uint16_t *o = (uint16_t *)out + i * os;
#pragma omp simd
            for (int j = 0; j < d; j++) {
                float a = bf16_to_f32(g[j]);
                float s = round_bf16(a / (1.f + exp_approx(-a)));
                o[j] = f32_to_bf16(s * bf16_to_f32(g[d + j]));
            }
        } else {
            const float *g = (const float *)gate_up + i * gs;
            float *o = (float *)out + i * os;
#pragma omp simd
            for (int j = 0; j < d; j++) {
                float a = g[j];
                o[j] = a / (1.f + exp_approx(-a)) * g[d + j];
            }
        }
    }
}

/* Copy token t's keys and values [heads, dim] (strides per token and head) into cache slot
 * slots[t] = block * block_size + offset (cache strides per block, slot and head). Returns the
 * number of slots outside [0, num_slots) (those tokens are not written). */
int64_t write_kv(const void *key, int64_t ks0, int64_t ks1, const void *value, int64_t vs0,
                 int64_t vs1, void *k_cache, void *v_cache, int64_t cb, int64_t cs, int64_t ch,
                 const int64_t *slots, int64_t tokens, int heads, int dim, int64_t block_size,
                 int64_t num_slots, int elsize, int nthreads) {
    int64_t bad = 0;
    size_t bytes = (size_t)dim * elsize;
#pragma omp parallel for schedule(static) num_threads(nthreads) reduction(+ : bad) \
    if (tokens * heads * dim >= PAR_MIN)
    for (int64_t t = 0; t < tokens; t++) {
        int64_t s = slots[t];
        if (s < 0 || s >= num_slots) {
            bad++;
            continue;
        }
        int64_t base = (s / block_size) * cb + (s % block_size) * cs;
        for (int h = 0; h < heads; h++) {
            memcpy((char *)k_cache + (base + h * ch) * elsize,
                   (const char *)key + (t * ks0 + h * ks1) * elsize, bytes);
            memcpy((char *)v_cache + (base + h * ch) * elsize,
                   (const char *)value + (t * vs0 + h * vs1) * elsize, bytes);
        }
    }
    return bad;
}
