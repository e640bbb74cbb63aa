/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cpu/cpu_scalar.c — plain-C dot kernels of every weight type and the activation
 * quantizers (the fallback ISA, and the readable statement of each block formula).
 * Layer 0 (backend/cpu). Formulas are formats.md §3.3: per block an exact int32 sum of q_w*q_a
 * (sub-block scales applied in integers), then one float multiply by the block scales; Q4_1/Q5_1
 * add m*s with s the Q8_1 sum field; K-quant mins use the Q8_K bsums.
 * Activation quantizers call the quant layer's x86-semantics references (formats.md §3.2), so all
 * ISAs quantize identically.
 * Non-goals: speed.
 */
#include "cpu_impl.h"

#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/quant.h"

#include <string.h>

#define H(x) qk_fp16_to_fp32(x)

/* Every dot1_<fmt> below is the same row loop: one float accumulator that adds, in block order,
 * the contribution of each block (elements for the float types). Only that contribution differs
 * per format, so the loop is written once (the macros) and each format states its block formula
 * in a static inline block_<fmt>, followed by the DOT_BLOCKS line that makes its row dot; the
 * compiler flattens the block function into the loop. */

/* dot_<name>: the kernel-table entry, dot1_<name> of one weight row with each of nc activation rows. */
#define SCALAR_DOT(name)                                                                                    \
    static void dot_##name(int64_t n, const void *w, const void *a, size_t as, int nc, float *out, size_t os) { \
        for (int c = 0; c < nc; c++) out[c * os] = dot1_##name(n, w, (const char *)a + c * as);             \
    }

/* dot1_<name>: sum over the n/qk blocks of one row of block_<name>(weight block, activation block);
 * and its dot_<name>. */
#define DOT_BLOCKS(name, wblk, ablk, qk)                                        \
    static float dot1_##name(int64_t n, const void *w, const void *a) {         \
        const wblk *x = w;                                                      \
        const ablk *y = a;                                                      \
        float s = 0.0f;                                                         \
        for (int64_t i = 0; i < n / (qk); i++) s += block_##name(&x[i], &y[i]); \
        return s;                                                               \
    }                                                                           \
    SCALAR_DOT(name)

// ---- float weights x f32 activations ----

/* dot1_<name>: sum over n elements of to_f32(weight element) * activation element; and its dot_<name>. */
#define DOT_FLOATS(name, welem, to_f32)                                    \
    static float dot1_##name(int64_t n, const void *w, const void *va) {  \
        const float *a = va;                                               \
        const welem *x = w;                                                \
        float s = 0.0f;                                                    \
        for (int64_t i = 0; i < n; i++) s += to_f32(x[i]) * a[i];          \
        return s;                                                          \
    }                                                                      \
    SCALAR_DOT(name)

#define F32(x) (x)
DOT_FLOATS(f32, float, F32)
DOT_FLOATS(f16, uint16_t, H)
DOT_FLOATS(bf16, uint16_t, qk_bf16_to_fp32)

// ---- legacy 32-blocks x Q8_0 / Q8_1 ----

/* Sum of (nibble - off) * activation over a 16-byte Q4_0-layout nibble array (low nibble: element
 * j, high: element j+16); off is 8 for Q4_0, 0 for Q4_1. */
static inline int nibbles_dot(const uint8_t *qs, int off, const int8_t *qa) {
    int sumi = 0;
    for (int j = 0; j < 16; j++) sumi += ((qs[j] & 15) - off) * qa[j] + ((qs[j] >> 4) - off) * qa[j + 16];
    return sumi;
}

/* As nibbles_dot with the 5th bit of element e at bit e of the u32 LE qh4 (Q5_0: off 16, Q5_1: 0),
 * into int sumi. A macro, not an inline function: with the offset a literal in the loop text GCC
 * keeps Q5_1's loop fully unrolled and scalar (an inline function with off = 0 came out SSE2-vectorised
 * and 35% slower). */
#define NIBBLES5_DOT(sumi, qs, qh4, off, qa)                                    \
    do {                                                                        \
        uint32_t qh_;                                                           \
        memcpy(&qh_, (qh4), 4);                                                 \
        for (int j = 0; j < 16; j++) {                                          \
            int x0 = (((qs)[j] & 15) | (((qh_ >> j) & 1) << 4)) - (off);        \
            int x1 = (((qs)[j] >> 4) | (((qh_ >> (j + 16)) & 1) << 4)) - (off); \
            (sumi) += x0 * (qa)[j] + x1 * (qa)[j + 16];                         \
        }                                                                       \
    } while (0)

static inline float block_q4_0(const blk_q4_0 *x, const blk_q8_0 *y) {
    return nibbles_dot(x->qs, 8, y->qs) * (H(x->d) * H(y->d));
}
DOT_BLOCKS(q4_0, blk_q4_0, blk_q8_0, QK8_0)

static inline float block_q4_1(const blk_q4_1 *x, const blk_q8_1 *y) {
    int sumi = nibbles_dot(x->qs, 0, y->qs);
    return (H(x->d) * H(y->d)) * sumi + H(x->m) * H(y->s);
}
DOT_BLOCKS(q4_1, blk_q4_1, blk_q8_1, QK8_1)

static inline float block_q5_0(const blk_q5_0 *x, const blk_q8_0 *y) {
    int sumi = 0;
    NIBBLES5_DOT(sumi, x->qs, x->qh, 16, y->qs);
    return sumi * (H(x->d) * H(y->d));
}
DOT_BLOCKS(q5_0, blk_q5_0, blk_q8_0, QK8_0)

static inline float block_q5_1(const blk_q5_1 *x, const blk_q8_1 *y) {
    int sumi = 0;
    NIBBLES5_DOT(sumi, x->qs, x->qh, 0, y->qs);
    return (H(x->d) * H(y->d)) * sumi + H(x->m) * H(y->s);
}
DOT_BLOCKS(q5_1, blk_q5_1, blk_q8_1, QK8_1)

static inline float block_q8_0(const blk_q8_0 *x, const blk_q8_0 *y) {
    int sumi = 0;
    for (int j = 0; j < QK8_0; j++) sumi += x->qs[j] * y->qs[j];
    return sumi * (H(x->d) * H(y->d));
}
DOT_BLOCKS(q8_0, blk_q8_0, blk_q8_0, QK8_0)

static inline float block_iq4_nl(const blk_iq4_nl *x, const blk_q8_0 *y) {
    int sumi = 0;
    for (int j = 0; j < 16; j++)
        sumi += kvalues_iq4nl[x->qs[j] & 15] * y->qs[j] + kvalues_iq4nl[x->qs[j] >> 4] * y->qs[j + 16];
    return (H(y->d) * H(x->d)) * sumi;
}
DOT_BLOCKS(iq4_nl, blk_iq4_nl, blk_q8_0, QK4_NL)

// ---- K-quants x Q8_K ----

/* 2-bit field of element e (0..255) in Q2_K/Q3_K's qs layout. */
static inline int q2_bits(const uint8_t *qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

static inline float block_q2_K(const blk_q2_K *x, const blk_q8_K *y) {
    int isum = 0, summs = 0;
    for (int j = 0; j < 16; j++) {
        int d16 = 0;
        for (int l = 0; l < 16; l++) d16 += q2_bits(x->qs, 16 * j + l) * y->qs[16 * j + l];
        isum += (x->scales[j] & 15) * d16;
        summs += (x->scales[j] >> 4) * y->bsums[j];
    }
    return (y->d * H(x->d)) * isum - (y->d * H(x->dmin)) * summs;
}
DOT_BLOCKS(q2_K, blk_q2_K, blk_q8_K, QK_K)

static inline float block_q3_K(const blk_q3_K *x, const blk_q8_K *y) {
    const uint8_t *sc = x->scales;
    int isum = 0;
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? sc[j] & 15 : sc[j - 8] >> 4;
        int hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
        int scale = (lo | hi << 4) - 32;
        int d16 = 0;
        for (int l = 0; l < 16; l++) {
            int e = 16 * j + l;
            int h = (x->hmask[e % 32] >> (e / 32)) & 1;
            d16 += (q2_bits(x->qs, e) - (h ? 0 : 4)) * y->qs[e];
        }
        isum += scale * d16;
    }
    return (H(x->d) * y->d) * isum;
}
DOT_BLOCKS(q3_K, blk_q3_K, blk_q8_K, QK_K)

/* get_scale_min_k4: 6-bit scale and min of sub-block j of Q4_K/Q5_K (formats.md §2.10). */
static inline void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* One Q4_K / Q5_K super-block (same scales, mins and nibble layout); qh is Q5_K's 5th-bit array,
 * NULL for Q4_K (a constant at each call, so the test folds away). */
static inline float block_k4(uint16_t d, uint16_t dmin, const uint8_t *scales, const uint8_t *qs, const uint8_t *qh,
                             const blk_q8_K *y) {
    int isum = 0, summ = 0;
    for (int j = 0; j < 8; j++) {
        int sc, m;
        scale_min_k4(j, scales, &sc, &m);
        const uint8_t *q = qs + 32 * (j / 2);
        int d32 = 0;
        for (int l = 0; l < 32; l++) {
            int v = (q[l] >> (4 * (j % 2))) & 15;
            if (qh) v |= ((qh[l] >> j) & 1) << 4;
            d32 += v * y->qs[32 * j + l];
        }
        isum += sc * d32;
        summ += m * (y->bsums[2 * j] + y->bsums[2 * j + 1]);
    }
    return (H(d) * y->d) * isum - (H(dmin) * y->d) * summ;
}

static inline float block_q4_K(const blk_q4_K *x, const blk_q8_K *y) {
    return block_k4(x->d, x->dmin, x->scales, x->qs, NULL, y);
}
DOT_BLOCKS(q4_K, blk_q4_K, blk_q8_K, QK_K)

static inline float block_q5_K(const blk_q5_K *x, const blk_q8_K *y) {
    return block_k4(x->d, x->dmin, x->scales, x->qs, x->qh, y);
}
DOT_BLOCKS(q5_K, blk_q5_K, blk_q8_K, QK_K)

static inline float block_q6_K(const blk_q6_K *x, const blk_q8_K *y) {
    int isum = 0;
    for (int j = 0; j < 16; j++) {
        int d16 = 0;
        for (int l16 = 0; l16 < 16; l16++) {
            int e = 16 * j + l16, nn = e / 128, r = e % 128, g = r / 32, l = r % 32;
            int lo = (x->ql[64 * nn + l + 32 * (g & 1)] >> (4 * (g >> 1))) & 15;
            int hi = (x->qh[32 * nn + l] >> (2 * g)) & 3;
            d16 += ((lo | hi << 4) - 32) * y->qs[e];
        }
        isum += x->scales[j] * d16;
    }
    return (H(x->d) * y->d) * isum;
}
DOT_BLOCKS(q6_K, blk_q6_K, blk_q8_K, QK_K)

static inline float block_iq4_xs(const blk_iq4_xs *x, const blk_q8_K *y) {
    int isum = 0;
    for (int ib = 0; ib < 8; ib++) {
        int ls = ((x->scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((x->scales_h >> (2 * ib)) & 3) << 4);
        const uint8_t *q = x->qs + 16 * ib;
        const int8_t *qy = y->qs + 32 * ib;
        int d32 = 0;
        for (int j = 0; j < 16; j++) d32 += kvalues_iq4nl[q[j] & 15] * qy[j] + kvalues_iq4nl[q[j] >> 4] * qy[j + 16];
        isum += (ls - 32) * d32;
    }
    return (H(x->d) * y->d) * isum;
}
DOT_BLOCKS(iq4_xs, blk_iq4_xs, blk_q8_K, QK_K)

// ---- activation quantizers ----

static void quant_f32(const float *x, void *dst, int64_t n) { memcpy(dst, x, (size_t)n * sizeof(float)); }

void cpu_fill_scalar(cpu_kernel_table *t) {
    t->dot[SB_TYPE_F32] = dot_f32;
    t->dot[SB_TYPE_F16] = dot_f16;
    t->dot[SB_TYPE_BF16] = dot_bf16;
    t->dot[SB_TYPE_Q4_0] = dot_q4_0;
    t->dot[SB_TYPE_Q4_1] = dot_q4_1;
    t->dot[SB_TYPE_Q5_0] = dot_q5_0;
    t->dot[SB_TYPE_Q5_1] = dot_q5_1;
    t->dot[SB_TYPE_Q8_0] = dot_q8_0;
    t->dot[SB_TYPE_IQ4_NL] = dot_iq4_nl;
    t->dot[SB_TYPE_Q2_K] = dot_q2_K;
    t->dot[SB_TYPE_Q3_K] = dot_q3_K;
    t->dot[SB_TYPE_Q4_K] = dot_q4_K;
    t->dot[SB_TYPE_Q5_K] = dot_q5_K;
    t->dot[SB_TYPE_Q6_K] = dot_q6_K;
    t->dot[SB_TYPE_IQ4_XS] = dot_iq4_xs;
    t->quant[SB_TYPE_F32] = quant_f32;
    t->quant[SB_TYPE_Q8_0] = qk_quantize_row_q8_0_x86;
    t->quant[SB_TYPE_Q8_1] = qk_quantize_row_q8_1_x86;
    t->quant[SB_TYPE_Q8_K] = qk_quantize_row_q8_K_ref;
}
