/* The guided-decoding mask on CPU: logits[row, t] = -inf where bit t % 32 of word t / 32 of the
 * row's bitmask is 0 (the xgrammar / vLLM format), tokens at or beyond 32 * words too. Only the
 * disallowed entries are written (two masked stores a word with AVX-512); a word of all ones
 * (every token of 32 allowed: the common case away from a constraint's edges) costs one compare. */
#include <math.h>
#include <stdint.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

/* float32 logits with row stride ls (elements); bitmask int32 with row stride bs; indices: the
 * rows to mask (NULL: rows 0..n-1). */
void apply_token_bitmask(float *logits, int64_t ls, const int32_t *bitmask, int64_t bs,
                         const int64_t *indices, int64_t n, int64_t vocab, int64_t words) {
    const int64_t covered = 32 * words < vocab ? 32 * words : vocab;
    for (int64_t i = 0; i < n; i++) {
        const int64_t r = indices ? indices[i] : i;
        float *row = logits + r * ls;
        const uint32_t *mask = (const uint32_t *)(bitmask + r * bs);
        int64_t w = 0;
#ifdef __AVX512F__
        const __m512 ninf = _mm512_set1_ps(-INFINITY);
        for (; 32 * w + 32 <= covered; w++) {
            const uint32_t off = ~mask[w];
            if (!off) continue;
            _mm512_mask_storeu_ps(row + 32 * w, (__mmask16)off, ninf);
            _mm512_mask_storeu_ps(row + 32 * w + 16, (__mmask16)(off >> 16), ninf);
        }
#endif
        for (; 32 * w < covered; w++) {
            uint32_t off = ~mask[w];
            if (covered - 32 * w < 32) off &= (1u << (covered - 32 * w)) - 1;
            for (; off; off &= off - 1) row[32 * w + __builtin_ctz(off)] = -INFINITY;
        }
        for (int64_t t = covered; t < vocab; t++) row[t] = -INFINITY;
    }
}
