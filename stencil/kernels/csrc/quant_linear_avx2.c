/* Quantized linear with int8 activations for CPUs with AVX2, FMA and F16C but no AVX-512 (AMD
 * before Zen 4, Intel client parts): the ABI and numerics of csrc/quant_linear_i8.c's qlinear_i8
 * and qlinear_i8_grouped, over the same packed weight (stencil/kernels/quant_weight.py).
 *
 *   out[M, N] = x'[M, K] @ W[N, K]^T (+ bias),  value(n, k) = (u(n, k) - Z) * scale + min
 *
 * x' is x rounded per block of 32 to int8 with one fp32 scale (d = max|x| / 127, q =
 * round_half_even(x * (1 / d)): reference.int8_rows). Per (row, channel, group) one exact int32
 * sum of (u - Z) * q, started at -Z * sum(q), then in fp32, in the VNNI kernel's order:
 *   acc += d * scale * sum((u - Z) * q) + min * d * sum(q)
 * so every output is the same bits as quant_linear_i8.c's (VNNI path) for the same inputs.
 *
 * The products are vpmaddubsw (u8 codes x s8 activations, adjacent byte pairs summed to int16).
 * Each strip of 16 channels and chunk of 256 k is expanded once into an L1 buffer in quad order
 * (a 32-bit lane = one channel's 4 k), two vectors per quad: channels 0-3 and 8-11 (vector A),
 * 4-7 and 12-15 (vector B), what one unpack of the nibble planes' 16-bit pairs gives; the scales
 * are permuted to match and the sums put back in channel order when stored. A row's int16 pair
 * sums are added over as many quads as cannot overflow (2 * 127 * max code: 8 quads of 4-bit
 * codes, 4 of 5-bit, 2 of 6-bit), then widened by vpmaddwd with ones, which sums the two pairs
 * of one channel's lane. 8-bit codes (signed) use the sign trick: |w| (u8, <= 128) times
 * sign(q, w), one quad at a time, the sums then being of code * q (Z = the stored zero).
 * OpenMP over (row tile, strip); built with -march=native by stencil/kernels/cpu_quant.py;
 * qlinear_i8_available() is 0 where the CPU or compiler lacks AVX2, FMA or F16C.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define HAVE_KERNEL 1
#endif

#define BLOCK 32    /* activation values per int8 scale */
#define SUPER 256   /* weights per super-block scale */
#define CHUNK_Q 64  /* quads per expanded chunk (256 k) */
#define ROW_TILE 64 /* rows per accumulator tile */
#define SERIAL_ROWS 4 /* rows a call rounds before its parallel region (one barrier fewer) */

int qlinear_i8_available(void) {
#ifdef HAVE_KERNEL
    return 1;
#else
    return 0;
#endif
}

#ifdef HAVE_KERNEL
typedef struct {
    int K, bits, G, Z, has_min;
    const uint8_t *codes; /* int8 codes or nibbles */
    const uint32_t *planes;
    const void *scales, *mins;     /* fp16, or int8 with super-block scales */
    const uint16_t *sup_s, *sup_m; /* the super-block scales and mins, or NULL */
} QW;

static inline int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* Row x [K] -> q [K] int8, d [K / 32] and per group of G (sq its sum of q): zs = -Z * sq (the
 * int32 sums' start) and ds = d * sq (the mins' factor), as quant_linear_i8.c's quantize_row. */
static void quantize_row(const float *x, int K, int G, int Z, int8_t *q, float *d, int32_t *zs,
                         float *ds) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int b = 0; b < K / BLOCK; b++) {
        __m256 v[4];
        for (int i = 0; i < 4; i++) v[i] = _mm256_loadu_ps(x + BLOCK * b + 8 * i);
        __m256 a[4];
        for (int i = 0; i < 4; i++) a[i] = _mm256_andnot_ps(sign, v[i]);
        const __m256 m = _mm256_max_ps(_mm256_max_ps(a[0], a[1]), _mm256_max_ps(a[2], a[3]));
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        const float amax = _mm_cvtss_f32(h);
        const float db = amax / 127.0f, id = amax > 0.0f ? 1.0f / db : 0.0f;
        __m256i qi[4];
        for (int i = 0; i < 4; i++)
            qi[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], _mm256_set1_ps(id)));
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]),
                                             _mm256_packs_epi32(qi[2], qi[3]));
        _mm256_storeu_si256((__m256i *)(q + BLOCK * b), _mm256_permutevar8x32_epi32(p, order));
        d[b] = db;
        const int32_t s0 = hsum_epi32(_mm256_add_epi32(qi[0], qi[1]));
        const int32_t s1 = hsum_epi32(_mm256_add_epi32(qi[2], qi[3]));
        if (G == 16) {
            zs[2 * b] = -Z * s0, zs[2 * b + 1] = -Z * s1;
            ds[2 * b] = db * (float)s0, ds[2 * b + 1] = db * (float)s1;
        } else {
            zs[b] = -Z * (s0 + s1), ds[b] = db * (float)(s0 + s1);
        }
    }
}

#ifndef AHEAD
#define AHEAD 2 /* chunks whose codes are prefetched ahead of the one expanded */
#endif

static inline void prefetch(const void *p, int64_t bytes) {
    for (int64_t i = 0; i < bytes; i += 64) _mm_prefetch((const char *)p + i, _MM_HINT_T0);
}

/* 16 fp16 values (channel order) as the A / B halves: channels 0-3, 8-11 and 4-7, 12-15. */
static inline void halves_ph(const uint16_t *p, __m256 *a, __m256 *b) {
    const __m256i v = _mm256_permute4x64_epi64(_mm256_loadu_si256((const __m256i *)p), 0xD8);
    *a = _mm256_cvtph_ps(_mm256_castsi256_si128(v));
    *b = _mm256_cvtph_ps(_mm256_extracti128_si256(v, 1));
}

/* The 16 scales (or mins) of groups [g0, g0 + ng) of strip s as A / B halves (quant_scales.h's
 * values: fp16, or int8 times the super-block's fp16, one super-block for the whole chunk). */
static inline void chunk_scales(const void *v, const uint16_t *sup, int K, int G, int64_t s,
                                int g0, int ng, __m256 *out) {
    const int64_t off = (s * (K / G) + g0) * 16;
    if (!sup) {
        for (int g = 0; g < ng; g++)
            halves_ph((const uint16_t *)v + off + 16 * g, out + 2 * g, out + 2 * g + 1);
        return;
    }
    __m256 sa, sb;
    halves_ph(sup + (s * (K / SUPER) + (int64_t)g0 * G / SUPER) * 16, &sa, &sb);
    for (int g = 0; g < ng; g++) {
        const __m128i raw = _mm_loadu_si128((const __m128i *)((const int8_t *)v + off + 16 * g));
        const __m128i sub = _mm_shuffle_epi32(raw, 0xD8); /* channels 0-3, 8-11, 4-7, 12-15 */
        const __m256i ia = _mm256_cvtepi8_epi32(sub);
        const __m256i ib = _mm256_cvtepi8_epi32(_mm_srli_si128(sub, 8));
        out[2 * g] = _mm256_mul_ps(_mm256_cvtepi32_ps(ia), sa);
        out[2 * g + 1] = _mm256_mul_ps(_mm256_cvtepi32_ps(ib), sb);
    }
}

/* Quads [0, nq) of nibbles (byte 2n: channel n's k0 | k2 << 4, byte 2n + 1: k1 | k3 << 4) as
 * bytes in quad order, with HB (a constant after inlining) bits above 4 from hi: quad q's byte j
 * is bits (q % P) * HB.. of byte j of hi's 64-byte vector q / P, P = 8 / HB. */
static inline __attribute__((always_inline)) void expand_nibbles(const uint8_t *src,
                                                                 const uint8_t *hi, int nq,
                                                                 const int HB, __m256i *buf) {
    const __m256i nib = _mm256_set1_epi8(0x0F);
    const __m256i top = _mm256_set1_epi8((char)(HB == 2 ? 0x30 : 0x10));
    const int P = HB ? 8 / HB : 1;
    for (int q0 = 0; q0 < nq; q0 += P) {
        __m256i ha = _mm256_setzero_si256(), hb = _mm256_setzero_si256();
        if (HB) { /* bytes 0-15: channels 0-3, 16-31: 4-7, 32-47: 8-11, 48-63: 12-15 */
            const __m256i h0 = _mm256_loadu_si256((const __m256i *)(hi + 8 * HB * q0));
            const __m256i h1 = _mm256_loadu_si256((const __m256i *)(hi + 8 * HB * q0 + 32));
            ha = _mm256_permute2x128_si256(h0, h1, 0x20);
            hb = _mm256_permute2x128_si256(h0, h1, 0x31);
        }
#pragma GCC unroll 8
        for (int i = 0; i < P; i++) {
            const int q = q0 + i;
            const __m256i v = _mm256_loadu_si256((const __m256i *)(src + 32 * q));
            const __m256i lo = _mm256_and_si256(v, nib);
            const __m256i up = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
            __m256i a = _mm256_unpacklo_epi16(lo, up), b = _mm256_unpackhi_epi16(lo, up);
            if (HB) { /* bits i*HB.. of each byte to bit 4 (epi16 shifts, then the mask) */
                const int sh = 4 - i * HB;
                const __m256i xa = sh >= 0 ? _mm256_slli_epi16(ha, sh) : _mm256_srli_epi16(ha, -sh);
                const __m256i xb = sh >= 0 ? _mm256_slli_epi16(hb, sh) : _mm256_srli_epi16(hb, -sh);
                a = _mm256_or_si256(a, _mm256_and_si256(xa, top));
                b = _mm256_or_si256(b, _mm256_and_si256(xb, top));
            }
            buf[2 * q] = a, buf[2 * q + 1] = b;
        }
    }
}

/* Expand quads [q0, q0 + nq) of strip s into buf (two vectors a quad; 8-bit codes: |code| in
 * buf and the signed codes in sgn) and the chunk's group scales and mins (A / B halves) into
 * sc / mn, and prefetch the codes AHEAD chunks on (the next strip's past the last chunk). */
static void expand(const QW *w, int64_t s, int q0, int nq, __m256i *buf, __m256i *sgn,
                   __m256 *sc, __m256 *mn) {
    const int gb = w->sup_s ? 16 : 32; /* bytes of a group's 16 scales */
    const int64_t scale_off = (s * (w->K / w->G) + (int64_t)(q0 + AHEAD * CHUNK_Q) * 4 / w->G) * gb;
    prefetch((const char *)w->scales + scale_off, (int64_t)nq * 4 / w->G * gb);
    if (w->has_min) prefetch((const char *)w->mins + scale_off, (int64_t)nq * 4 / w->G * gb);
    const int g0 = q0 * 4 / w->G, ng = nq * 4 / w->G; /* a chunk is one super-block */
    chunk_scales(w->scales, w->sup_s, w->K, w->G, s, g0, ng, sc);
    if (w->has_min) chunk_scales(w->mins, w->sup_m, w->K, w->G, s, g0, ng, mn);
    if (w->bits == 8) { /* pair vectors 2q, 2q + 1: word n = channel n's (k0, k1), (k2, k3) */
        const uint8_t *src = w->codes + (s * (w->K / 2) + 2 * q0) * 32;
        prefetch(src + AHEAD * CHUNK_Q * 64, nq * 64);
        for (int q = 0; q < nq; q++) {
            const __m256i p0 = _mm256_loadu_si256((const __m256i *)(src + 64 * q));
            const __m256i p1 = _mm256_loadu_si256((const __m256i *)(src + 64 * q + 32));
            const __m256i a = _mm256_unpacklo_epi16(p0, p1), b = _mm256_unpackhi_epi16(p0, p1);
            sgn[2 * q] = a, sgn[2 * q + 1] = b;
            buf[2 * q] = _mm256_abs_epi8(a), buf[2 * q + 1] = _mm256_abs_epi8(b);
        }
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

/* The 4 bytes at p in every 32-bit lane. */
static inline __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* One group's exact integer sums (channels in A / B halves) into a row's fp32 accumulators, in
 * the VNNI kernel's order: sum x (group scale x the row's block d), then the row's group sum
 * times the group's min (K-quants with a min). Both the tiled and the direct path call it, so
 * their outputs are bit-equal. */
static inline __attribute__((always_inline)) void combine_group(
    __m256i ia, __m256i ib, const __m256 *sc, const __m256 *mn, float d, int has_min,
    const float *dmin, __m256 *aa, __m256 *ab) {
    const __m256 dr = _mm256_set1_ps(d);
    *aa = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia), _mm256_mul_ps(sc[0], dr), *aa);
    *ab = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ib), _mm256_mul_ps(sc[1], dr), *ab);
    if (has_min) {
        const __m256 f = _mm256_set1_ps(*dmin);
        *aa = _mm256_fmadd_ps(f, mn[0], *aa);
        *ab = _mm256_fmadd_ps(f, mn[1], *ab);
    }
}

/* RB rows, group size G and quads per int16 run R (constants after inlining; S8: signed 8-bit
 * codes) against one expanded chunk; acc: rows of 16 floats (A half, then B half). */
static inline __attribute__((always_inline)) void rows_chunk(
    const int RB, const int G, const int R, const int S8, const QW *w, int q0, int nq,
    const __m256i *buf, const __m256i *sgn, const __m256 *sc, const __m256 *mn, const int8_t *q,
    const float *d, const int32_t *zs, const float *ds, float *acc) {
    const int gq = G / 4, groups = w->K / G, blocks = w->K / BLOCK;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 aa[4], ab[4];
    for (int r = 0; r < RB; r++)
        aa[r] = _mm256_loadu_ps(acc + 16 * r), ab[r] = _mm256_loadu_ps(acc + 16 * r + 8);
    for (int g0 = 0; g0 < nq; g0 += gq) {
        const int g = (q0 + g0) / gq, b = g * G / BLOCK, j = g0 / gq;
        __m256i ia[4], ib[4];
        for (int r = 0; r < RB; r++) ia[r] = ib[r] = _mm256_set1_epi32(zs[r * groups + g]);
        for (int v0 = 0; v0 < gq; v0 += R) {
            __m256i sa[4], sb[4];
            for (int v = v0; v < v0 + R; v++) {
                const __m256i wa = buf[2 * (g0 + v)], wb = buf[2 * (g0 + v) + 1];
                const int k = 4 * (q0 + g0 + v);
                for (int r = 0; r < RB; r++) {
                    const __m256i x = bcast4(q + r * (int64_t)w->K + k);
                    __m256i pa, pb;
                    if (S8) {
                        pa = _mm256_maddubs_epi16(wa, _mm256_sign_epi8(x, sgn[2 * (g0 + v)]));
                        pb = _mm256_maddubs_epi16(wb, _mm256_sign_epi8(x, sgn[2 * (g0 + v) + 1]));
                    } else {
                        pa = _mm256_maddubs_epi16(wa, x);
                        pb = _mm256_maddubs_epi16(wb, x);
                    }
                    sa[r] = v == v0 ? pa : _mm256_add_epi16(sa[r], pa);
                    sb[r] = v == v0 ? pb : _mm256_add_epi16(sb[r], pb);
                    /* one running sum: GCC otherwise reassociates the adds into a tree of all
                     * the run's products at once, more than the 16 registers hold */
                    __asm__("" : "+x"(sa[r]), "+x"(sb[r]));
                }
            }
            for (int r = 0; r < RB; r++) {
                ia[r] = _mm256_add_epi32(ia[r], _mm256_madd_epi16(sa[r], ones));
                ib[r] = _mm256_add_epi32(ib[r], _mm256_madd_epi16(sb[r], ones));
            }
        }
        for (int r = 0; r < RB; r++)
            combine_group(ia[r], ib[r], sc + 2 * j, mn + 2 * j, d[r * blocks + b], w->has_min,
                          ds + r * groups + g, aa + r, ab + r);
    }
    for (int r = 0; r < RB; r++)
        _mm256_storeu_ps(acc + 16 * r, aa[r]), _mm256_storeu_ps(acc + 16 * r + 8, ab[r]);
}

/* Rows dotted together against one chunk: 2-4 (sharing the chunk's loads) measured level or
 * slower on Zen 3 (their sums spill from the 16 registers). */
#ifndef PASS_ROWS
#define PASS_ROWS 1
#endif

/* Every row of a tile against one chunk, PASS_ROWS at a time, for group size G, run R, S8. */
static inline __attribute__((always_inline)) void tile_chunk(
    const int G, const int R, const int S8, const QW *w, int q0, int nq, const __m256i *buf,
    const __m256i *sgn, const __m256 *sc, const __m256 *mn, const int8_t *q, const float *d,
    const int32_t *zs, const float *ds, int rows, float *acc) {
    const int64_t groups = w->K / G, blocks = w->K / BLOCK;
    int r = 0;
    for (; r + PASS_ROWS <= rows; r += PASS_ROWS)
        rows_chunk(PASS_ROWS, G, R, S8, w, q0, nq, buf, sgn, sc, mn, q + r * (int64_t)w->K,
                   d + r * blocks, zs + r * groups, ds + r * groups, acc + 16 * r);
    for (; r < rows; r++)
        rows_chunk(1, G, R, S8, w, q0, nq, buf, sgn, sc, mn, q + r * (int64_t)w->K,
                   d + r * blocks, zs + r * groups, ds + r * groups, acc + 16 * r);
}

/* A / B halves <-> channel order (the same two permutes both ways). */
static inline void swap_halves(const float *src, float *dst) {
    const __m256 lo = _mm256_loadu_ps(src), hi = _mm256_loadu_ps(src + 8);
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(dst + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
}

/* The direct path for a few rows (DIRECT_ROWS or fewer): no expanded chunk. A quad's 32 code
 * bytes already hold, per 16-bit lane n, channel n's (k0, k1) in the low nibbles and (k2, k3) in
 * the high ones (8-bit codes: the two pair vectors as stored), so one vpmaddubsw against the
 * row's (k0, k1) broadcast to every 16-bit lane gives the 16 channels' pair sums in channel
 * order, another the (k2, k3) ones, each added in its own int16 run (as many quads as the tiled
 * path's runs: one pair per lane a quad). At a run's end the unpacks of the two runs' words put
 * channel n's two sums in one 32-bit lane, in the A / B halves, and vpmaddwd with ones widens
 * them: the same exact int32 sums, then the same fp32 order, so the same bits. The bits above 4
 * come from the planes' quad-order bytes by one vpshufb per 4 channels (pairs (k0, k1) to the
 * low 8 bytes of each 4, (k2, k3) to the high 8) and 64-bit unpacks of the A and B halves. */
#define DIRECT_ROWS 1 /* 2-4 rows (DIRECT_RB 1, 2 or 4) measured level with the tiled path */
#define DIRECT_RB 1   /* rows dotted together against a quad's decoded codes */

/* Row bytes (p[2j], p[2j + 1]), j = 0..7, in every 16-bit lane, from a 16-byte broadcast
 * (vpbroadcastw from memory measured level or slower). */
static inline __m256i pair_of(__m256i x16, const int j) {
    return _mm256_shuffle_epi8(x16, _mm256_set1_epi16((short)((2 * j + 1) << 8 | 2 * j)));
}

/* RB rows against quads [q0, q0 + nq) of strip s (the chunk's scales and mins in sc / mn, A / B
 * halves) for group size G, run R and code width BITS (constants after inlining); acc: rows of 16
 * floats (A half, then B half). */
static inline __attribute__((always_inline)) void direct_chunk(
    const int RB, const int G, const int R, const int BITS, const QW *w, int64_t s, int q0, int nq,
    const __m256 *sc, const __m256 *mn, const int8_t *q, const float *d, const int32_t *zs,
    const float *ds, float *acc) {
    const int K = w->K, HB = BITS == 8 ? 0 : BITS - 4, P = HB ? 8 / HB : 1, gq = G / 4;
    const int U = gq > P ? gq : P; /* quads a step: whole groups and whole high-bit vectors */
    const int groups = K / G, blocks = K / BLOCK;
    const uint8_t *src = BITS == 8 ? w->codes + (s * (K / 2) + 2 * q0) * 32
                                   : w->codes + (s * (K / 4) + q0) * 32;
    const uint8_t *hi = HB ? (const uint8_t *)w->planes + (s * (K / 4) + q0) * 8 * HB : 0;
    const __m256i nib = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    const __m256i top = _mm256_set1_epi8((char)(HB == 2 ? 0x30 : 0x10));
    const __m256i pairs = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                           0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    __m256 aa[DIRECT_RB], ab[DIRECT_RB];
    for (int r = 0; r < RB; r++)
        aa[r] = _mm256_loadu_ps(acc + 16 * r), ab[r] = _mm256_loadu_ps(acc + 16 * r + 8);
    for (int u0 = 0; u0 < nq; u0 += U) {
        __m256i hl = _mm256_setzero_si256(), hu = _mm256_setzero_si256();
        __m256i x16[DIRECT_RB][2];
        for (int r = 0; r < RB; r++)
            for (int h = 0; h < U / 4; h++)
                x16[r][h] = _mm256_broadcastsi128_si256(_mm_loadu_si128(
                    (const __m128i *)(q + r * (int64_t)K + 4 * (q0 + u0) + 16 * h)));
#pragma GCC unroll 8
        for (int gi = 0; gi < U / gq; gi++) {
            const int g = (q0 + u0) / gq + gi, b = g * G / BLOCK, j = u0 / gq + gi;
            __m256i ia[DIRECT_RB], ib[DIRECT_RB];
            for (int r = 0; r < RB; r++) ia[r] = ib[r] = _mm256_set1_epi32(zs[r * groups + g]);
#pragma GCC unroll 8
            for (int v0 = 0; v0 < gq; v0 += R) {
                __m256i sl[DIRECT_RB], su[DIRECT_RB];
#pragma GCC unroll 8
                for (int v = v0; v < v0 + R; v++) {
                    const int i = gi * gq + v, qq = u0 + i; /* i: the quad within the step */
                    if (HB && i % P == 0) { /* this step's high bits, as (k0, k1) / (k2, k3) */
                        const uint8_t *h = hi + 8 * HB * qq;
                        const __m256i h0 = _mm256_loadu_si256((const __m256i *)h);
                        const __m256i h1 = _mm256_loadu_si256((const __m256i *)(h + 32));
                        const __m256i ha = _mm256_shuffle_epi8(
                            _mm256_permute2x128_si256(h0, h1, 0x20), pairs);
                        const __m256i hb = _mm256_shuffle_epi8(
                            _mm256_permute2x128_si256(h0, h1, 0x31), pairs);
                        hl = _mm256_unpacklo_epi64(ha, hb), hu = _mm256_unpackhi_epi64(ha, hb);
                    }
                    __m256i lo, up, wl, wu;
                    if (BITS == 8) {
                        lo = _mm256_loadu_si256((const __m256i *)(src + 64 * qq));
                        up = _mm256_loadu_si256((const __m256i *)(src + 64 * qq + 32));
                        wl = _mm256_abs_epi8(lo), wu = _mm256_abs_epi8(up);
                    } else {
                        const __m256i c = _mm256_loadu_si256((const __m256i *)(src + 32 * qq));
                        wl = _mm256_and_si256(c, nib);
                        wu = _mm256_and_si256(_mm256_srli_epi16(c, 4), nib);
                        if (HB) {
                            const int sh = 4 - (i % P) * HB;
                            const __m256i xl = sh >= 0 ? _mm256_slli_epi16(hl, sh)
                                                       : _mm256_srli_epi16(hl, -sh);
                            const __m256i xu = sh >= 0 ? _mm256_slli_epi16(hu, sh)
                                                       : _mm256_srli_epi16(hu, -sh);
                            wl = _mm256_or_si256(wl, _mm256_and_si256(xl, top));
                            wu = _mm256_or_si256(wu, _mm256_and_si256(xu, top));
                        }
                        lo = up = wl;
                    }
                    for (int r = 0; r < RB; r++) {
                        __m256i xl = pair_of(x16[r][i / 4], 2 * (i % 4));
                        __m256i xu = pair_of(x16[r][i / 4], 2 * (i % 4) + 1);
                        if (BITS == 8) xl = _mm256_sign_epi8(xl, lo), xu = _mm256_sign_epi8(xu, up);
                        const __m256i pl = _mm256_maddubs_epi16(wl, xl);
                        const __m256i pu = _mm256_maddubs_epi16(wu, xu);
                        sl[r] = v == v0 ? pl : _mm256_add_epi16(sl[r], pl);
                        su[r] = v == v0 ? pu : _mm256_add_epi16(su[r], pu);
                    }
                }
                for (int r = 0; r < RB; r++) {
                    const __m256i a = _mm256_unpacklo_epi16(sl[r], su[r]);
                    const __m256i b = _mm256_unpackhi_epi16(sl[r], su[r]);
                    ia[r] = _mm256_add_epi32(ia[r], _mm256_madd_epi16(a, ones));
                    ib[r] = _mm256_add_epi32(ib[r], _mm256_madd_epi16(b, ones));
                }
            }
            for (int r = 0; r < RB; r++)
                combine_group(ia[r], ib[r], sc + 2 * j, mn + 2 * j, d[r * blocks + b], w->has_min,
                              ds + r * groups + g, aa + r, ab + r);
        }
    }
    for (int r = 0; r < RB; r++)
        _mm256_storeu_ps(acc + 16 * r, aa[r]), _mm256_storeu_ps(acc + 16 * r + 8, ab[r]);
}

/* Every row (DIRECT_RB at a time) against one chunk of strip s, for G, R, BITS. */
static inline __attribute__((always_inline)) void direct_rows(
    const int G, const int R, const int BITS, const QW *w, int64_t s, int q0, int nq,
    const __m256 *sc, const __m256 *mn, const int8_t *q, const float *d, const int32_t *zs,
    const float *ds, int rows, float *acc) {
    const int64_t groups = w->K / G, blocks = w->K / BLOCK;
    int r = 0;
    for (; r + DIRECT_RB <= rows; r += DIRECT_RB)
        direct_chunk(DIRECT_RB, G, R, BITS, w, s, q0, nq, sc, mn, q + r * (int64_t)w->K,
                     d + r * blocks, zs + r * groups, ds + r * groups, acc + 16 * r);
    for (; r < rows; r++)
        direct_chunk(1, G, R, BITS, w, s, q0, nq, sc, mn, q + r * (int64_t)w->K, d + r * blocks,
                     zs + r * groups, ds + r * groups, acc + 16 * r);
}

/* Strip s for DIRECT_ROWS rows or fewer: per chunk its scales, then every row straight from
 * the packed codes. */
static void strip_direct(const QW *w, int64_t s, const int8_t *q, const float *d,
                         const int32_t *zs, const float *ds, int rows, const float *bias,
                         float *out, int64_t N) {
    __m256 sc[2 * CHUNK_Q / 4], mn[2 * CHUNK_Q / 4];
    float acc[DIRECT_ROWS * 16] = {0};
    float b[16] = {0};
    if (bias) swap_halves(bias + 16 * s, b);
    for (int r = 0; r < rows; r++) memcpy(acc + 16 * r, b, 64);
    const int gb = w->sup_s ? 16 : 32, hb = w->bits == 8 ? 0 : w->bits - 4;
    for (int q0 = 0; q0 < w->K / 4; q0 += CHUNK_Q) {
        const int nq = w->K / 4 - q0 < CHUNK_Q ? w->K / 4 - q0 : CHUNK_Q;
        const int64_t ahead = q0 + AHEAD * CHUNK_Q;
        if (w->bits != 6) { /* 6-bit: the hardware's prefetch alone (head 9-15% faster) */
            const int64_t scale_off = (s * (w->K / w->G) + ahead * 4 / w->G) * gb;
            const int64_t scale_bytes = (int64_t)nq * 4 / w->G * gb;
            prefetch((const char *)w->scales + scale_off, scale_bytes);
            if (w->has_min) prefetch((const char *)w->mins + scale_off, scale_bytes);
            if (w->bits == 8) {
                prefetch(w->codes + (s * (w->K / 2) + 2 * ahead) * 32, nq * 64);
            } else {
                prefetch(w->codes + (s * (w->K / 4) + ahead) * 32, nq * 32);
                if (hb)
                    prefetch((const uint8_t *)w->planes + (s * (w->K / 4) + ahead) * 8 * hb,
                             nq * 8 * hb);
            }
        }
        const int g0 = q0 * 4 / w->G, ng = nq * 4 / w->G;
        chunk_scales(w->scales, w->sup_s, w->K, w->G, s, g0, ng, sc);
        if (w->has_min) chunk_scales(w->mins, w->sup_m, w->K, w->G, s, g0, ng, mn);
        switch (w->bits) {
        case 8:
            if (w->G == 16)
                direct_rows(16, 1, 8, w, s, q0, nq, sc, mn, q, d, zs, ds, rows, acc);
            else
                direct_rows(32, 1, 8, w, s, q0, nq, sc, mn, q, d, zs, ds, rows, acc);
            break;
        case 6:
            if (w->G == 16)
                direct_rows(16, 2, 6, w, s, q0, nq, sc, mn, q, d, zs, ds, rows, acc);
            else
                direct_rows(32, 2, 6, w, s, q0, nq, sc, mn, q, d, zs, ds, rows, acc);
            break;
        case 5:
            if (w->G == 16)
                direct_rows(16, 4, 5, w, s, q0, nq, sc, mn, q, d, zs, ds, rows, acc);
            else
                direct_rows(32, 4, 5, w, s, q0, nq, sc, mn, q, d, zs, ds, rows, acc);
            break;
        default:
            if (w->G == 16)
                direct_rows(16, 4, 4, w, s, q0, nq, sc, mn, q, d, zs, ds, rows, acc);
            else
                direct_rows(32, 8, 4, w, s, q0, nq, sc, mn, q, d, zs, ds, rows, acc);
        }
    }
    for (int r = 0; r < rows; r++) swap_halves(acc + 16 * r, out + r * N + 16 * s);
}

/* Strip s (16 channels) for a tile of rows: each chunk of codes expanded once, then dotted with
 * every row. */
static void strip_tile(const QW *w, int64_t s, const int8_t *q, const float *d, const int32_t *zs,
                       const float *ds, int rows, const float *bias, float *out, int64_t N) {
    if (rows <= DIRECT_ROWS) {
        strip_direct(w, s, q, d, zs, ds, rows, bias, out, N);
        return;
    }
    __m256i buf[2 * CHUNK_Q], sgn[2 * CHUNK_Q];
    __m256 sc[2 * CHUNK_Q / 4], mn[2 * CHUNK_Q / 4];
    float acc[ROW_TILE * 16];
    float b[16] = {0};
    if (bias) swap_halves(bias + 16 * s, b);
    for (int r = 0; r < rows; r++) memcpy(acc + 16 * r, b, 64);
    for (int q0 = 0; q0 < w->K / 4; q0 += CHUNK_Q) {
        const int nq = w->K / 4 - q0 < CHUNK_Q ? w->K / 4 - q0 : CHUNK_Q;
        expand(w, s, q0, nq, buf, sgn, sc, mn);
        switch (w->bits) {
        case 8:
            if (w->G == 16)
                tile_chunk(16, 1, 1, w, q0, nq, buf, sgn, sc, mn, q, d, zs, ds, rows, acc);
            else
                tile_chunk(32, 1, 1, w, q0, nq, buf, sgn, sc, mn, q, d, zs, ds, rows, acc);
            break;
        case 6:
            if (w->G == 16)
                tile_chunk(16, 2, 0, w, q0, nq, buf, sgn, sc, mn, q, d, zs, ds, rows, acc);
            else
                tile_chunk(32, 2, 0, w, q0, nq, buf, sgn, sc, mn, q, d, zs, ds, rows, acc);
            break;
        case 5:
            if (w->G == 16)
                tile_chunk(16, 4, 0, w, q0, nq, buf, sgn, sc, mn, q, d, zs, ds, rows, acc);
            else
                tile_chunk(32, 4, 0, w, q0, nq, buf, sgn, sc, mn, q, d, zs, ds, rows, acc);
            break;
        default:
            if (w->G == 16)
                tile_chunk(16, 4, 0, w, q0, nq, buf, sgn, sc, mn, q, d, zs, ds, rows, acc);
            else
                tile_chunk(32, 8, 0, w, q0, nq, buf, sgn, sc, mn, q, d, zs, ds, rows, acc);
        }
    }
    for (int r = 0; r < rows; r++) swap_halves(acc + 16 * r, out + r * N + 16 * s);
}
#endif

/* x: fp32 [M, K] (K a multiple of 32); out: fp32 [M, N] with N = 16 * strips; zero: the code of
 * value 0 as stored (8-bit codes are signed). Returns 0, or -1 when scratch memory is short. */
int qlinear_i8(const float *x, int64_t M, int K, int64_t N, int bits, int G, int zero,
               const void *codes, const uint32_t *planes, const void *scales, const void *mins,
               const uint16_t *sup_s, const uint16_t *sup_m, const float *bias, float *out,
               int nthreads) {
#ifdef HAVE_KERNEL
    const QW w = {K, bits, G, zero, mins != 0, (const uint8_t *)codes, planes, scales, mins,
                  sup_s, sup_m};
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
    if (M <= SERIAL_ROWS) /* here, saving the parallel region a barrier */
        for (int64_t m = 0; m < M; m++)
            quantize_row(x + m * K, K, G, w.Z, q + m * K, d + m * blocks, zs + m * groups,
                         ds + m * groups);
#pragma omp parallel num_threads(nthreads)
    {
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
                           ds + m0 * groups, rows, bias, out + m0 * N, N);
            }
    }
    free(q); free(d); free(zs); free(ds);
    return 0;
#else
    (void)x; (void)M; (void)K; (void)N; (void)bits; (void)G; (void)zero; (void)codes; (void)planes;
    (void)scales; (void)mins; (void)sup_s; (void)sup_m; (void)bias; (void)out; (void)nthreads;
    return -1;
#endif
}

#ifdef HAVE_KERNEL
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
#endif

/* Mixture-of-experts in one call, as quant_linear_i8.c's: E weights of one format, expert e's
 * rows [offsets[e], offsets[e + 1]) (grouped by expert) times its weight (and bias, or NULL)
 * into the same rows of out [M, N]; work units (expert, row tile, strip) in one parallel region.
 * rows (or NULL): grouped row m reads x[rows[m]]. pos/w (or NULL): token t's output is sum_j
 * w[t*top+j] * out[pos[t*top+j]], written to combined [T, N]. Returns 0, or -1 (no scratch). */
int qlinear_i8_grouped(const float *x, const int64_t *offsets, int E, int K, int64_t N, int bits,
                       int G, int zero, const void *const *codes, const uint32_t *const *planes,
                       const void *const *scales, const void *const *mins,
                       const uint16_t *const *sup_s, const uint16_t *const *sup_m,
                       const float *const *bias, float *out, int nthreads, const int64_t *rows,
                       int64_t T, int top, const int64_t *pos, const float *w, float *combined) {
#ifdef HAVE_KERNEL
    const int64_t M = offsets[E], strips = N / 16, blocks = K / BLOCK, groups = K / G;
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
        const int64_t n = offsets[e + 1] - offsets[e];
        first[e + 1] = first[e] + (n + ROW_TILE - 1) / ROW_TILE * strips;
    }
#pragma omp parallel num_threads(nthreads)
    {
#pragma omp for schedule(static)
        for (int64_t m = 0; m < M; m++)
            quantize_row(x + (rows ? rows[m] : m) * K, K, G, zero, q + m * K, d + m * blocks,
                         zs + m * groups, ds + m * groups);
#pragma omp for schedule(static)
        for (int64_t u = 0; u < first[E]; u++) {
            int lo = 0, hi = E - 1; /* the expert e with first[e] <= u < first[e + 1] */
            while (lo < hi) {
                const int mid = (lo + hi + 1) / 2;
                if (first[mid] <= u) lo = mid; else hi = mid - 1;
            }
            const int e = lo;
            const int64_t t = (u - first[e]) / strips, s = (u - first[e]) % strips;
            const int64_t m0 = offsets[e] + t * ROW_TILE, end = offsets[e + 1];
            const int n = end - m0 < ROW_TILE ? (int)(end - m0) : ROW_TILE;
            const QW wt = {K, bits, G, zero, mins[e] != 0, (const uint8_t *)codes[e], planes[e],
                           scales[e], mins[e], sup_s[e], sup_m[e]};
            strip_tile(&wt, s, q + m0 * K, d + m0 * blocks, zs + m0 * groups, ds + m0 * groups,
                       n, bias[e], out + m0 * N, N);
        }
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
