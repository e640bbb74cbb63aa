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

// ---- float weights x f32 activations ----

static float dot1_f32(int64_t n, const void *w, const void *va) {
    const float *a = va;
    const float *x = w;
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += x[i] * a[i];
    return s;
}

static float dot1_f16(int64_t n, const void *w, const void *va) {
    const float *a = va;
    const uint16_t *x = w;
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += H(x[i]) * a[i];
    return s;
}

static float dot1_bf16(int64_t n, const void *w, const void *va) {
    const float *a = va;
    const uint16_t *x = w;
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += qk_bf16_to_fp32(x[i]) * a[i];
    return s;
}

// ---- legacy 32-blocks x Q8_0 / Q8_1 ----

static float dot1_q4_0(int64_t n, const void *w, const void *a) {
    const blk_q4_0 *x = w;
    const blk_q8_0 *y = a;
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += ((x[i].qs[j] & 15) - 8) * y[i].qs[j] + ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
        s += sumi * (H(x[i].d) * H(y[i].d));
    }
    return s;
}

static float dot1_q4_1(int64_t n, const void *w, const void *a) {
    const blk_q4_1 *x = w;
    const blk_q8_1 *y = a;
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++) sumi += (x[i].qs[j] & 15) * y[i].qs[j] + (x[i].qs[j] >> 4) * y[i].qs[j + 16];
        s += (H(x[i].d) * H(y[i].d)) * sumi + H(x[i].m) * H(y[i].s);
    }
    return s;
}

static float dot1_q5_0(int64_t n, const void *w, const void *a) {
    const blk_q5_0 *x = w;
    const blk_q8_0 *y = a;
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            int x0 = ((x[i].qs[j] & 15) | (((qh >> j) & 1) << 4)) - 16;
            int x1 = ((x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
            sumi += x0 * y[i].qs[j] + x1 * y[i].qs[j + 16];
        }
        s += sumi * (H(x[i].d) * H(y[i].d));
    }
    return s;
}

static float dot1_q5_1(int64_t n, const void *w, const void *a) {
    const blk_q5_1 *x = w;
    const blk_q8_1 *y = a;
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            int x0 = (x[i].qs[j] & 15) | (((qh >> j) & 1) << 4);
            int x1 = (x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
            sumi += x0 * y[i].qs[j] + x1 * y[i].qs[j + 16];
        }
        s += (H(x[i].d) * H(y[i].d)) * sumi + H(x[i].m) * H(y[i].s);
    }
    return s;
}

static float dot1_q8_0(int64_t n, const void *w, const void *a) {
    const blk_q8_0 *x = w;
    const blk_q8_0 *y = a;
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int sumi = 0;
        for (int j = 0; j < QK8_0; j++) sumi += x[i].qs[j] * y[i].qs[j];
        s += sumi * (H(x[i].d) * H(y[i].d));
    }
    return s;
}

static float dot1_iq4_nl(int64_t n, const void *w, const void *a) {
    const blk_iq4_nl *x = w;
    const blk_q8_0 *y = a;
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK4_NL; i++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += kvalues_iq4nl[x[i].qs[j] & 15] * y[i].qs[j] + kvalues_iq4nl[x[i].qs[j] >> 4] * y[i].qs[j + 16];
        s += (H(y[i].d) * H(x[i].d)) * sumi;
    }
    return s;
}

// ---- K-quants x Q8_K ----

/* 2-bit field of element e (0..255) in Q2_K/Q3_K's qs layout. */
static inline int q2_bits(const uint8_t *qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

static float dot1_q2_K(int64_t n, const void *w, const void *a) {
    const blk_q2_K *x = w;
    const blk_q8_K *y = a;
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0, summs = 0;
        for (int j = 0; j < 16; j++) {
            int d16 = 0;
            for (int l = 0; l < 16; l++) d16 += q2_bits(x[i].qs, 16 * j + l) * y[i].qs[16 * j + l];
            isum += (x[i].scales[j] & 15) * d16;
            summs += (x[i].scales[j] >> 4) * y[i].bsums[j];
        }
        s += (y[i].d * H(x[i].d)) * isum - (y[i].d * H(x[i].dmin)) * summs;
    }
    return s;
}

static float dot1_q3_K(int64_t n, const void *w, const void *a) {
    const blk_q3_K *x = w;
    const blk_q8_K *y = a;
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *sc = x[i].scales;
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            int lo = j < 8 ? sc[j] & 15 : sc[j - 8] >> 4;
            int hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
            int scale = (lo | hi << 4) - 32;
            int d16 = 0;
            for (int l = 0; l < 16; l++) {
                int e = 16 * j + l;
                int h = (x[i].hmask[e % 32] >> (e / 32)) & 1;
                d16 += (q2_bits(x[i].qs, e) - (h ? 0 : 4)) * y[i].qs[e];
            }
            isum += scale * d16;
        }
        s += (H(x[i].d) * y[i].d) * isum;
    }
    return s;
}

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

static float dot1_q4_K(int64_t n, const void *w, const void *a) {
    const blk_q4_K *x = w;
    const blk_q8_K *y = a;
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0, summ = 0;
        for (int j = 0; j < 8; j++) {
            int sc, m;
            scale_min_k4(j, x[i].scales, &sc, &m);
            const uint8_t *q = x[i].qs + 32 * (j / 2);
            int d32 = 0;
            for (int l = 0; l < 32; l++) d32 += ((q[l] >> (4 * (j % 2))) & 15) * y[i].qs[32 * j + l];
            isum += sc * d32;
            summ += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        s += (H(x[i].d) * y[i].d) * isum - (H(x[i].dmin) * y[i].d) * summ;
    }
    return s;
}

static float dot1_q5_K(int64_t n, const void *w, const void *a) {
    const blk_q5_K *x = w;
    const blk_q8_K *y = a;
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0, summ = 0;
        for (int j = 0; j < 8; j++) {
            int sc, m;
            scale_min_k4(j, x[i].scales, &sc, &m);
            const uint8_t *q = x[i].qs + 32 * (j / 2);
            int d32 = 0;
            for (int l = 0; l < 32; l++) {
                int v = ((q[l] >> (4 * (j % 2))) & 15) | (((x[i].qh[l] >> j) & 1) << 4);
                d32 += v * y[i].qs[32 * j + l];
            }
            isum += sc * d32;
            summ += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        s += (H(x[i].d) * y[i].d) * isum - (H(x[i].dmin) * y[i].d) * summ;
    }
    return s;
}

static float dot1_q6_K(int64_t n, const void *w, const void *a) {
    const blk_q6_K *x = w;
    const blk_q8_K *y = a;
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            int d16 = 0;
            for (int l16 = 0; l16 < 16; l16++) {
                int e = 16 * j + l16, nn = e / 128, r = e % 128, g = r / 32, l = r % 32;
                int lo = (x[i].ql[64 * nn + l + 32 * (g & 1)] >> (4 * (g >> 1))) & 15;
                int hi = (x[i].qh[32 * nn + l] >> (2 * g)) & 3;
                d16 += ((lo | hi << 4) - 32) * y[i].qs[e];
            }
            isum += x[i].scales[j] * d16;
        }
        s += (H(x[i].d) * y[i].d) * isum;
    }
    return s;
}

static float dot1_iq4_xs(int64_t n, const void *w, const void *a) {
    const blk_iq4_xs *x = w;
    const blk_q8_K *y = a;
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0;
        for (int ib = 0; ib < 8; ib++) {
            int ls = ((x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((x[i].scales_h >> (2 * ib)) & 3) << 4);
            const uint8_t *q = x[i].qs + 16 * ib;
            const int8_t *qy = y[i].qs + 32 * ib;
            int d32 = 0;
            for (int j = 0; j < 16; j++) d32 += kvalues_iq4nl[q[j] & 15] * qy[j] + kvalues_iq4nl[q[j] >> 4] * qy[j + 16];
            isum += (ls - 32) * d32;
        }
        s += (H(x[i].d) * y[i].d) * isum;
    }
    return s;
}

// ---- nc-row wrappers ----

#define SCALAR_DOT(name)                                                                                    \
    static void dot_##name(int64_t n, const void *w, const void *a, size_t as, int nc, float *out, size_t os) { \
        for (int c = 0; c < nc; c++) out[c * os] = dot1_##name(n, w, (const char *)a + c * as);             \
    }

SCALAR_DOT(f32)
SCALAR_DOT(f16)
SCALAR_DOT(bf16)
SCALAR_DOT(q4_0)
SCALAR_DOT(q4_1)
SCALAR_DOT(q5_0)
SCALAR_DOT(q5_1)
SCALAR_DOT(q8_0)
SCALAR_DOT(iq4_nl)
SCALAR_DOT(q2_K)
SCALAR_DOT(q3_K)
SCALAR_DOT(q4_K)
SCALAR_DOT(q5_K)
SCALAR_DOT(q6_K)
SCALAR_DOT(iq4_xs)

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
