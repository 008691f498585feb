/* The AMX-INT8 path of csrc/quant_linear_i8.c (included there after QW, BLOCK and CHUNK_Q): a
 * tile's rows against one expanded chunk of a strip, the int32 sums of each group by TDPBSUD (s8
 * rows x u8 codes, exact like vpdpbusd's) instead of G / 4 vpdpbusd per row and group, then the
 * same fp32 combine as rows_chunk there, operation for operation, so a row's output is the same
 * bits on either path and does not depend on the rows beside it.
 *
 * Tiles: A = R <= 16 rows x G bytes of q (the group's k, row stride K); B = the group's G / 4 quad
 * vectors of the expanded chunk as they lie (row k / 4, lane n = channel n's four k: the layout
 * TDPBSUD reads); C = R rows x 16 channels of int32. The scales are per group, so each group needs
 * its own C: four groups are in flight on C 0-3, their sums stored to L1 for the combine.
 * Measured by bench/kernels/quant_rows_bench.py: a group's tiles cost ~30 cycles whatever R (the
 * store ~15 of them), so AMX only wins from 9 rows (AMX_MIN), where the 8 vpdpbusd per row and
 * group it saves outweigh them; the fp32 combine (cvt, mul, 2 fma per row and group, on the same
 * vector port as vpdpbusd here) is then most of the time. Pairing two groups per tile (A rows
 * zero-padded to 2G k) did not lower that threshold. Groups of 16 (Q6_K: a store per 16 k) never
 * win and stay on VNNI (use_amx in csrc/quant_linear_i8.c).
 *
 * Linux hands out the tile data state on request: amx_ready() asks once per process
 * (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)) and is 0 where the kernel refuses. Each
 * thread loads its tile configuration (amx_config) when the tile shape changes and releases the
 * tiles (_tile_release) at the end of the parallel region. Built only with AMX-TILE and AMX-INT8
 * (-march=native on such a CPU); HAVE_AMX is undefined otherwise. */
#if defined(__AMX_TILE__) && defined(__AMX_INT8__)
#define HAVE_AMX 1
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#define AMX_ROWS 16 /* rows of a tile */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

typedef struct { /* the LDTILECFG operand (palette 1) */
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} TileConfig;

static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
static int amx_granted; /* set once, by amx_request under amx_once */

static void amx_request(void) {
    amx_granted = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

static int amx_ready(void) {
    pthread_once(&amx_once, amx_request);
    return amx_granted;
}

/* The calling thread's tiles for R rows and groups of G k: C 0-3 (R x 16 int32), A 4-5 (R x G
 * int8), B 6-7 (G / 4 quads x 16 lanes). */
static void amx_config(int R, int G) {
    TileConfig c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 4; t++) c.rows[t] = (uint8_t)R, c.colsb[t] = 64;
    for (int t = 4; t < 6; t++) c.rows[t] = (uint8_t)R, c.colsb[t] = (uint16_t)G;
    for (int t = 6; t < 8; t++) c.rows[t] = (uint8_t)(G / 4), c.colsb[t] = 64;
    _tile_loadconfig(&c);
}

/* Group j's sums into C tile c from A tile a and B tile b (tile numbers are literals in the
 * instructions). A and B alternate between 4 / 6 and 5 / 7 so that a group's loads do not wait
 * for the previous group's multiply. */
#define AMX_GROUP(c, a, b, j)                    \
    do {                                         \
        _tile_zero(c);                           \
        _tile_loadd(a, q + (j) * G, K);          \
        _tile_loadd(b, buf + (j) * gq, 64);      \
        _tile_dpbsud(c, a, b);                   \
    } while (0)

/* dots[j][r][n] = sum over group j's k of q[r][k] * code(n, k), j < n_groups, for the rows the
 * tiles are configured for; q points at the chunk's first k of row 0, buf at its expanded codes.
 * Four groups in flight (C 0-3), stored after the four multiplies are issued: a multiply's
 * latency is hidden behind the next three instead of stalling its store. */
static void amx_dots(const int8_t *q, int K, int G, int n_groups, const __m512i *buf,
                     int32_t *dots) {
    const int gq = G / 4;
    int j = 0;
    for (; j + 4 <= n_groups; j += 4) {
        AMX_GROUP(0, 4, 6, j);
        AMX_GROUP(1, 5, 7, j + 1);
        AMX_GROUP(2, 4, 6, j + 2);
        AMX_GROUP(3, 5, 7, j + 3);
        _tile_stored(0, dots + j * 256, 64);
        _tile_stored(1, dots + (j + 1) * 256, 64);
        _tile_stored(2, dots + (j + 2) * 256, 64);
        _tile_stored(3, dots + (j + 3) * 256, 64);
    }
    for (; j < n_groups; j++) {
        AMX_GROUP(0, 4, 6, j);
        _tile_stored(0, dots + j * 256, 64);
    }
}

/* The fp32 combine of rows_chunk for RB rows (a constant after inlining) from their int32 sums
 * dots [group][row (stride 16)][channel]: group by group, the same operations in the same order. */
static inline __attribute__((always_inline)) void combine_rows(
    const int RB, const QW *w, int g0, int n_groups, const int32_t *dots, const __m512 *sc,
    const __m512 *mn, const float *d, const int32_t *zs, const float *ds, float *acc) {
    const int G = w->G, groups = w->K / G, blocks = w->K / BLOCK;
    __m512 a[8];
    for (int r = 0; r < RB; r++) a[r] = _mm512_loadu_ps(acc + 16 * r);
    for (int j = 0; j < n_groups; j++) {
        const int g = g0 + j, b = g * G / BLOCK;
        for (int r = 0; r < RB; r++) {
            const __m512i dot = _mm512_loadu_si512(dots + j * 256 + 16 * r);
            const __m512i part =
                w->Z ? _mm512_add_epi32(dot, _mm512_set1_epi32(zs[r * groups + g])) : dot;
            a[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(part),
                                   _mm512_mul_ps(sc[j], _mm512_set1_ps(d[r * blocks + b])), a[r]);
        }
        if (w->has_min)
            for (int r = 0; r < RB; r++)
                a[r] = _mm512_fmadd_ps(_mm512_set1_ps(ds[r * groups + g]), mn[j], a[r]);
    }
    for (int r = 0; r < RB; r++) _mm512_storeu_ps(acc + 16 * r, a[r]);
}

#define COMBINE_CASE(n)                                                                 \
    case n:                                                                             \
        combine_rows(n, w, g0, n_groups, dots + 16 * (r - r0), sc, mn, d + r * blocks, \
                     zs + r * groups, ds + r * groups, acc + 16 * r);                  \
        break;

/* The rows of a tile against one expanded chunk through AMX: AMX_ROWS rows at a time, the int32
 * sums of every group of the chunk from amx_dots, then combine_rows 8 rows at a time (so each
 * row's floats are those of rows_chunk: a row's output does not depend on the rows beside it).
 * *config: the thread's current tile shape (amx_config). */
static void rows_chunk_amx(const QW *w, int64_t s, int q0, int nq, const __m512i *buf,
                           const int8_t *q, const float *d, const int32_t *zs, const float *ds,
                           int rows, float *acc, int *config) {
    int32_t dots[CHUNK_Q * 4 / 16 * 256]; /* [group][row][channel], 16 groups at most (G = 16) */
    __m512 sc[CHUNK_Q * 4 / 16], mn[CHUNK_Q * 4 / 16];
    const int G = w->G, n_groups = nq * 4 / G, g0 = q0 * 4 / G;
    const int groups = w->K / G, blocks = w->K / BLOCK;
    for (int j = 0; j < n_groups; j++) {
        sc[j] = group_scales(w->scales, w->sup_s, w->K, G, s, g0 + j);
        mn[j] = w->has_min ? group_scales(w->mins, w->sup_m, w->K, G, s, g0 + j)
                           : _mm512_setzero_ps();
    }
    for (int r0 = 0; r0 < rows; r0 += AMX_ROWS) {
        const int R = rows - r0 < AMX_ROWS ? rows - r0 : AMX_ROWS;
        if (*config != R * 256 + G) {
            amx_config(R, G);
            *config = R * 256 + G;
        }
        amx_dots(q + r0 * (int64_t)w->K + 4 * q0, w->K, G, n_groups, buf, dots);
        for (int r = r0; r < r0 + R; r += 8) {
            switch (r0 + R - r < 8 ? r0 + R - r : 8) {
                COMBINE_CASE(1) COMBINE_CASE(2) COMBINE_CASE(3) COMBINE_CASE(4)
                COMBINE_CASE(5) COMBINE_CASE(6) COMBINE_CASE(7) COMBINE_CASE(8)
            }
        }
    }
}
#endif
