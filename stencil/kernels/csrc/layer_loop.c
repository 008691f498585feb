/* A whole stack of Llama-shaped decoder layers in one call: the same C kernels the Python layer
 * calls one by one (csrc/quant_linear_i8.c, csrc/layer_ops.c, csrc/paged_attention.c), reached
 * through function pointers, in the same order on the same buffers, so the result is the Python
 * forward's bit for bit without ~10 Python-to-C round trips per layer. fp32 activations and
 * cache, quantized weights (16-channel strips, no padding), full rotary, no sliding window. A
 * projection whose parts are stored in different formats (a Q4_K_M file's q/k in Q4_K, v in
 * Q6_K) runs part by part into scratch, its columns copied into place and the bias added after,
 * as cpu_linear.py runs a SplitWeight.
 *
 * Per layer, with x the hidden rows and r the residual (vLLM's layout):
 *   x = norm(r) (layer 0) | r += x, x = norm(r)
 *   qkv = x Wqkv (+ b);  rotate q, k;  write k, v into the cache;  a = attention(q, cache)
 *   x = a Wo;  r += x, x = norm(r);  g = x Wgate_up;  x = (silu(g0) * g1) Wdown
 * The final norm stays with the caller. Built by stencil/kernels/cpu_layer_loop.py. */
#include <stdint.h>

typedef int (*qlinear_fn)(const float *, int64_t, int, int64_t, int, int, int, const void *,
                          const uint32_t *, const void *, const void *, const uint16_t *,
                          const uint16_t *, const float *, float *, int);
typedef void (*rms_norm_fn)(void *, int64_t, int64_t, const void *, int64_t, int64_t,
                            const void *, int64_t, int64_t, int, float, int, int);
typedef void (*add_norm_fn)(void *, int64_t, void *, int64_t, const void *, int64_t, int, float,
                            int, int);
typedef int64_t (*rotary_fn)(const int64_t *, int64_t, void *, int64_t, int64_t, int, void *,
                             int64_t, int64_t, int, const float *, int64_t, int, int, int);
typedef void (*silu_fn)(void *, int64_t, const void *, int64_t, int64_t, int, int, int);
typedef int64_t (*write_kv_fn)(const void *, int64_t, int64_t, const void *, int64_t, int64_t,
                               void *, void *, int64_t, int64_t, int64_t, const int64_t *,
                               int64_t, int, int, int64_t, int64_t, int, int);
typedef void (*attention_fn)(const float *, int64_t, const void *, const void *, int, int64_t,
                             int64_t, int64_t, const int32_t *, int, const int32_t *,
                             const int32_t *, const int32_t *, int, int, int, int, int, float, int,
                             const float *, float *, int, float);

typedef struct {
    qlinear_fn qlinear;
    rms_norm_fn rms_norm;
    add_norm_fn add_norm;
    rotary_fn rotary;
    silu_fn silu;
    write_kv_fn write_kv;
    attention_fn attention;
} Ops;

typedef struct { /* one quantized weight [N, K] (quant_weight.py's layout) */
    int64_t N;
    int K, bits, G, zero;
    const void *codes;
    const uint32_t *planes;
    const void *scales, *mins;     /* fp16, or int8 with super-block scales */
    const uint16_t *sup_s, *sup_m; /* the K-quants' super-block scales and mins, or NULL */
} Part;

#define MAX_PARTS 3

typedef struct { /* a projection [N, K]: 1 to MAX_PARTS parts stacked along N, an fp32 bias */
    int64_t N;
    int num_parts;
    Part part[MAX_PARTS];
    const float *bias;
} Linear;

typedef struct {
    const float *input_norm, *post_norm;
    Linear qkv, o, gate_up, down;
    void *k_cache, *v_cache;
} Layer;

typedef struct { /* the model's shapes and the caches' layout (strides per block, slot, head) */
    int hidden, heads, kv_heads, dim, inter;
    float eps, scale;
    const float *cos_sin;
    int64_t max_pos, cb, cs, ch, block_size, num_slots;
} Shape;

typedef struct { /* one step: its tokens, their cache slots, the attention plan */
    int64_t tokens;
    const int64_t *positions, *slots;
    const int32_t *tables, *cu, *ctx, *units;
    int width, num_units;
} Step;

typedef struct { /* fp32 scratch: x [T, hidden], r [T, hidden] (holds the embedding on entry), qkv
                  * [T, (heads + 2 kv_heads) dim], attention out [T, heads dim], g [T, 2 inter],
                  * act [T, inter], part [T, the widest part of a split projection] */
    float *x, *r, *qkv, *attn, *gate_up, *act, *part;
} Scratch;

static int qlinear(const Ops *op, const Part *p, const float *in, int64_t T, const float *bias,
                   float *out, int nt) {
    return op->qlinear(in, T, p->K, p->N, p->bits, p->G, p->zero, p->codes, p->planes, p->scales,
                       p->mins, p->sup_s, p->sup_m, bias, out, nt);
}

static int linear(const Ops *op, const Linear *w, const float *in, int64_t T, float *out,
                  float *part, int nt) {
    if (w->num_parts == 1) return qlinear(op, w->part, in, T, w->bias, out, nt);
    int64_t col = 0;
    for (int i = 0; i < w->num_parts; col += w->part[i++].N) {
        const int64_t n = w->part[i].N;
        if (qlinear(op, w->part + i, in, T, 0, part, nt)) return -1;
        for (int64_t t = 0; t < T; t++) {
            float *dst = out + t * w->N + col;
            const float *src = part + t * n;
            if (w->bias)
                for (int64_t j = 0; j < n; j++) dst[j] = src[j] + w->bias[col + j];
            else
                for (int64_t j = 0; j < n; j++) dst[j] = src[j];
        }
    }
    return 0;
}

/* Returns 0; -1 when a linear found no scratch memory; -2 a position outside the rotary table;
 * -3 a slot outside the cache. */
int layer_loop(const Ops *op, const Layer *layers, int num_layers, const Shape *s, const Step *st,
               const Scratch *b, int nt) {
    const int64_t T = st->tokens, H = s->hidden, nqkv = layers[0].qkv.N;
    const int qd = s->heads * s->dim, kvd = s->kv_heads * s->dim;
    for (int l = 0; l < num_layers; l++) {
        const Layer *L = layers + l;
        if (l == 0)
            op->rms_norm(b->x, H, 0, b->r, H, 0, L->input_norm, T, 1, (int)H, s->eps, 0, nt);
        else
            op->add_norm(b->x, H, b->r, H, L->input_norm, T, (int)H, s->eps, 0, nt);
        if (linear(op, &L->qkv, b->x, T, b->qkv, b->part, nt)) return -1;
        float *q = b->qkv, *k = b->qkv + qd, *v = b->qkv + qd + kvd;
        if (op->rotary(st->positions, T, q, nqkv, s->dim, s->heads, k, nqkv, s->dim, s->kv_heads,
                       s->cos_sin, s->max_pos, s->dim, 0, nt))
            return -2;
        if (op->write_kv(k, nqkv, s->dim, v, nqkv, s->dim, L->k_cache, L->v_cache, s->cb, s->cs,
                         s->ch, st->slots, T, s->kv_heads, s->dim, s->block_size, s->num_slots, 4,
                         nt))
            return -3;
        op->attention(q, nqkv, L->k_cache, L->v_cache, 0, s->cb, s->cs, s->ch, st->tables,
                      st->width, st->cu, st->ctx, st->units, st->num_units, s->heads, s->kv_heads,
                      s->dim, (int)s->block_size, s->scale, 0, 0, b->attn, nt, 0.0f);
        if (linear(op, &L->o, b->attn, T, b->x, b->part, nt)) return -1;
        op->add_norm(b->x, H, b->r, H, L->post_norm, T, (int)H, s->eps, 0, nt);
        if (linear(op, &L->gate_up, b->x, T, b->gate_up, b->part, nt)) return -1;
        op->silu(b->act, s->inter, b->gate_up, 2 * (int64_t)s->inter, T, s->inter, 0, nt);
        if (linear(op, &L->down, b->act, T, b->x, b->part, nt)) return -1;
    }
    return 0;
}
