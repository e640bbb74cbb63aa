/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * quant/k_quants.c — the K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: 256-element super-blocks with
 * quantized per-sub-block scales (formats.md §2.8-§2.11) and their fitting helpers (§2.13).
 * Layer 1 (quant). Reference quantizers = llama.cpp quantize_row_*_K_ref. These are exactly what
 * llama-quantize runs without an imatrix: quantize_q{2..6}_K(..., quant_weights = NULL) call the
 * ref on the whole chunk (formats.md §2.14). With an importance matrix llama-quantize runs
 * quantize_row_q{2..6}_K_impl row by row: qk_quantize_row_q*_K_imatrix (make_qkx3 / make_qp /
 * weighted make_qx, formats.md §2.8-§2.11 "With an imatrix"; the code order follows ggml-quants.c).
 * Invariants (all load-bearing for bit-exactness):
 *  - fp32 in the order written, no FMA (-ffp-contract=off); `w*x*l` means ((w*x)*l).
 *  - nint() ties to even; requantization divides by the fp16-ROUNDED H(d)*sc.
 *  - a sub-block whose quantized scale is 0 keeps the first-pass L; zero groups get L = 0.
 *  - Q4_K/Q5_K wrap a negative nint to uint8 before min(63).
 * Non-goals: SIMD dequantization (backend kernels, tested against these).
 */
#include "quant/quant.h"
#include "quant/blocks.h"
#include "quant/qk_internal.h"

// ---- helpers (formats.md §2.13) ----

/* Weighted sums of the signed fit l = clamp(nint(iscale*x), -nmax, nmax-1), weights qw (x² when
 * NULL): *sumlx = Σ w*x*l, *suml2 = Σ w*l*l in element order; stores l + l_off into L unless NULL. */
static inline void signed_fit_sums(int n, int nmax, float iscale, const float *x, const float *qw, int8_t *L,
                                   int l_off, float *sumlx, float *suml2) {
    float slx = 0, sl2 = 0;
    for (int i = 0; i < n; i++) {
        int l = qk_nint(iscale * x[i]);
        l = QK_MAX(-nmax, QK_MIN(nmax - 1, l));
        if (L) L[i] = (int8_t)(l + l_off);
        const float w = qw ? qw[i] : x[i] * x[i];
        slx += w * x[i] * (float)l;
        sl2 += w * (float)l * (float)l;
    }
    *sumlx = slx;
    *suml2 = sl2;
}

/* Signed symmetric fit with weights qw (x² when NULL), rmse_type 1: L in 0..2*nmax-1. */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L, const float *qw) {
    const float max = qk_signed_absmax(n, x);
    if (fabsf(max) < QK_GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.f;
    }
    float iscale = (float)(-nmax) / max;
    float sumlx, suml2;
    signed_fit_sums(n, nmax, iscale, x, qw, L, nmax, &sumlx, &suml2);
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        signed_fit_sums(n, nmax, iscale, x, qw, NULL, 0, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                const int l = qk_nint(iscale * x[i]);
                L[i] = (int8_t)(nmax + QK_MAX(-nmax, QK_MIN(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Signed fit refined one element at a time (do_rmse = true), weights x²; L in 0..2*nmax-1. */
static float make_q3_quants(int n, int nmax, const float *x, int8_t *L) {
    const float max = qk_signed_absmax(n, x);
    if (fabsf(max) < QK_GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.f;
    }
    float sumlx, suml2;
    signed_fit_sums(n, nmax, (float)(-nmax) / max, x, NULL, L, 0, &sumlx, &suml2);
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * (float)L[i] * (float)L[i];
                int new_l = qk_nint(x[i] * sl2 / slx);
                new_l = QK_MAX(-nmax, QK_MIN(nmax - 1, new_l));
                if (new_l != L[i]) {
                    slx += w * x[i] * (float)new_l;
                    sl2 += w * (float)new_l * (float)new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Asymmetric fit x ≈ scale*L - the_min with L in 0..nmax, searching nstep+1 scales around
 * nmax/(max-min) and solving the weighted least squares for (scale, min) at each. */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                              int use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        const int l = qk_nint(iscale * (x[i] - min));
        L[i] = (uint8_t)QK_MAX(0, QK_MIN(nmax, l));
        float diff = scale * (float)L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = qk_nint(iscale * (x[i] - min));
            l = QK_MAX(0, QK_MIN(nmax, l));
            Laux[i] = (uint8_t)l;
            const float w = weights[i];
            sum_l += w * (float)l;
            sum_l2 += w * (float)l * (float)l;
            sum_xl += w * (float)l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * (float)Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; i++) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* Unsigned fit of x >= 0 to L in 0..nmax with weights w (imatrix path only): the best of 9 scales
 * around nmax/max, then up to 5 passes moving single L's; returns sumlx/suml2. */
static float make_qp_quants(int n, int nmax, const float *x, uint8_t *L, const float *w) {
    float max = 0;
    for (int i = 0; i < n; i++) max = QK_MAX(max, x[i]);
    if (!max) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.f;
    }
    float iscale = (float)nmax / max;
    float scale = 1 / iscale, best_mse = 0;
    for (int i = 0; i < n; i++) {
        const uint8_t l = (uint8_t)qk_nint(iscale * x[i]); /* ggml stores it in L first: uint8 */
        const float diff = x[i] - scale * (float)l;
        best_mse += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0) continue;
        const float iscale_is = (0.1f * (float)is + (float)nmax) / max;
        const float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; i++) {
            const int l = QK_MIN(nmax, qk_nint(iscale_is * x[i]));
            const float diff = x[i] - scale_is * (float)l;
            mse += w[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = QK_MIN(nmax, qk_nint(iscale * x[i]));
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * (float)l;
        suml2 += w[i] * (float)l * (float)l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float slx = sumlx - w[i] * x[i] * (float)L[i];
            float sl2 = suml2 - w[i] * (float)L[i] * (float)L[i];
            if (slx > 0 && sl2 > 0) {
                const int new_l = QK_MIN(nmax, qk_nint(x[i] * sl2 / slx));
                if (new_l != L[i]) {
                    slx += w[i] * x[i] * (float)new_l;
                    sl2 += w[i] * (float)new_l * (float)new_l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    return sumlx / suml2;
}

/* make_qkx3_quants with explicit weights: make_qkx2's search with (-0.9, 0.05, 36) and no MAD;
 * its degenerate test max <= min equals make_qkx2's max == min for the finite inputs quantized. */
static float make_qkx3_quants(int n, int nmax, const float *x, const float *w, uint8_t *L, float *the_min) {
    uint8_t Laux[32];
    return make_qkx2_quants(n, nmax, x, w, L, the_min, Laux, -0.9f, 0.05f, 36, 0);
}

float qk_make_qx_quants(int n, int nmax, const float *x, int8_t *L, const float *qw) {
    return make_qx_quants(n, nmax, x, L, qw);
}

float qk_make_qkx3_quants(int n, int nmax, const float *x, const float *w, uint8_t *L, float *the_min) {
    return make_qkx3_quants(n, nmax, x, w, L, the_min);
}

/* Σ x² over n elements, in order. */
static float sum_sq(int n, const float *x) {
    float s = 0;
    for (int i = 0; i < n; i++) s += x[i] * x[i];
    return s;
}

/* The 12-byte 6-bit scale/min packing of Q4_K/Q5_K (see quant/blocks.h). */
static inline void get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Pack 2-bit codes: qs[32n + l] holds elements 128n + l + 32k at bits 2k (Q2_K and Q3_K). */
static void pack_2bit(uint8_t *qs, const uint8_t *L) {
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; l++) {
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                      (L[j + l + 96] << 6));
        }
    }
}

// ---- Q2_K ----

/* Requantize against the stored scales (a zero scale keeps the first-pass L), then pack. */
static void q2_K_finish(const float *x, blk_q2_K *y, uint8_t *L) {
    for (int j = 0; j < QK_K / 16; j++) {
        const float d = qk_fp16_to_fp32(y->d) * (float)(y->scales[j] & 0xF);
        if (!d) continue;
        const float dm = qk_fp16_to_fp32(y->dmin) * (float)(y->scales[j] >> 4);
        for (int ii = 0; ii < 16; ii++) {
            int l = qk_nint((x[16 * j + ii] + dm) / d);
            L[16 * j + ii] = (uint8_t)QK_MAX(0, QK_MIN(3, l));
        }
    }
    pack_2bit(y->qs, L);
}

void qk_quantize_row_q2_K_ref(const float *x, void *vy, int64_t n) {
    QK_CHECK_ROW(n, QK_K);
    blk_q2_K *y = (blk_q2_K *)vy;
    uint8_t L[QK_K], Laux[16];
    float weights[16], mins[QK_K / 16], scales[QK_K / 16];
    const float q4scale = 15.f;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux,
                                         -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < QK_K / 16; j++) y[i].scales[j] = (uint8_t)qk_nint(iscale * scales[j]);
            y[i].d = qk_fp32_to_fp16(max_scale / q4scale);
        } else {
            for (int j = 0; j < QK_K / 16; j++) y[i].scales[j] = 0;
            y[i].d = qk_fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < QK_K / 16; j++) {
                const int l = qk_nint(iscale * mins[j]);
                y[i].scales[j] = (uint8_t)(y[i].scales[j] | (l << 4));
            }
            y[i].dmin = qk_fp32_to_fp16(max_min / q4scale);
        } else {
            y[i].dmin = qk_fp32_to_fp16(0.f);
        }
        q2_K_finish(x, &y[i], L);
    }
}

/* quantize_row_q2_K_impl: weights qw*sqrt(σ² + x²) with σ² = Σx²/256, make_qkx3 per 16, the
 * scales and mins by make_qp_quants weighted with each sub-block's Σw. */
void qk_quantize_row_q2_K_imatrix(const float *x, void *vy, int64_t n, const float *qw) {
    QK_CHECK_ROW(n, QK_K);
    blk_q2_K *y = (blk_q2_K *)vy;
    uint8_t L[QK_K], Ls[QK_K / 16], Lm[QK_K / 16];
    float mins[QK_K / 16], scales[QK_K / 16], sw[QK_K / 16], weight[16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K, qw += QK_K) {
        const float sigma2 = sum_sq(QK_K, x) / QK_K;
        for (int j = 0; j < QK_K / 16; j++) {
            sw[j] = 0;
            for (int l = 0; l < 16; l++) weight[l] = qw[16 * j + l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
            for (int l = 0; l < 16; l++) sw[j] += weight[l];
            scales[j] = make_qkx3_quants(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j]);
        }
        const float dm = make_qp_quants(QK_K / 16, 15, scales, Ls, sw);
        const float mm = make_qp_quants(QK_K / 16, 15, mins, Lm, sw);
        y[i].d = qk_fp32_to_fp16(dm);
        y[i].dmin = qk_fp32_to_fp16(mm);
        for (int j = 0; j < QK_K / 16; j++) y[i].scales[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
        q2_K_finish(x, &y[i], L);
    }
}

void qk_dequantize_row_q2_K(const void *vx, float *y, int64_t n) {
    QK_CHECK_ROW(n, QK_K);
    const blk_q2_K *x = (const blk_q2_K *)vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = qk_fp16_to_fp32(x[i].d);
        const float min = qk_fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int nn = 0; nn < QK_K; nn += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    const uint8_t sc = x[i].scales[is++];
                    const float dl = d * (float)(sc & 0xF), ml = min * (float)(sc >> 4);
                    for (int l = 0; l < 16; l++) *y++ = dl * (float)((q[l + 16 * half] >> shift) & 3) - ml;
                }
            }
        }
    }
}

// ---- Q3_K ----

/* Requantize against the stored 6-bit scales (a zero scale keeps the first-pass L), split the
 * high bit into hmask (element e -> bit e/32 of hmask[e%32]) and pack the low 2 bits. */
static void q3_K_finish(const float *x, blk_q3_K *y, int8_t *L) {
    for (int j = 0; j < QK_K / 16; j++) {
        int8_t sc = (int8_t)(j < 8 ? y->scales[j] & 0xF : y->scales[j - 8] >> 4);
        sc = (int8_t)((sc | (((y->scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
        const float d = qk_fp16_to_fp32(y->d) * (float)sc;
        if (!d) continue;
        for (int ii = 0; ii < 16; ii++) {
            int l = qk_nint(x[16 * j + ii] / d);
            L[16 * j + ii] = (int8_t)(QK_MAX(-4, QK_MIN(3, l)) + 4);
        }
    }
    memset(y->hmask, 0, sizeof y->hmask);
    for (int j = 0; j < QK_K; j++) {
        if (L[j] > 3) {
            y->hmask[j % 32] = (uint8_t)(y->hmask[j % 32] | (1u << (j / 32)));
            L[j] = (int8_t)(L[j] - 4);
        }
    }
    pack_2bit(y->qs, (const uint8_t *)L);
}

void qk_quantize_row_q3_K_ref(const float *x, void *vy, int64_t n) {
    QK_CHECK_ROW(n, QK_K);
    blk_q3_K *y = (blk_q3_K *)vy;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        for (int j = 0; j < QK_K / 16; j++) scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
        const float max_scale = qk_signed_absmax(QK_K / 16, scales);
        memset(y[i].scales, 0, sizeof y[i].scales);
        if (max_scale) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < QK_K / 16; j++) {
                int8_t l = (int8_t)qk_nint(iscale * scales[j]);
                l = (int8_t)(QK_MAX(-32, QK_MIN(31, l)) + 32);
                if (j < 8) y[i].scales[j] = (uint8_t)(l & 0xF);
                else y[i].scales[j - 8] = (uint8_t)(y[i].scales[j - 8] | ((l & 0xF) << 4));
                l = (int8_t)(l >> 4);
                y[i].scales[j % 4 + 8] = (uint8_t)(y[i].scales[j % 4 + 8] | (l << (2 * (j / 4))));
            }
            y[i].d = qk_fp32_to_fp16(1 / iscale);
        } else {
            y[i].d = qk_fp32_to_fp16(0.f);
        }
        q3_K_finish(x, &y[i], L);
    }
}

/* quantize_row_q3_K_impl: weights qw*sqrt(σ² + x²) with σ² = 2Σx²/256, weighted make_qx per 16;
 * the 16 scales are fitted by make_qx_quants(16, 32, ..., Σw) whose result is d. */
void qk_quantize_row_q3_K_imatrix(const float *x, void *vy, int64_t n, const float *qw) {
    QK_CHECK_ROW(n, QK_K);
    blk_q3_K *y = (blk_q3_K *)vy;
    int8_t L[QK_K], Ls[QK_K / 16];
    float scales[QK_K / 16], weight[16], sw[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K, qw += QK_K) {
        const float sigma2 = 2 * sum_sq(QK_K, x) / QK_K;
        for (int j = 0; j < QK_K / 16; j++) {
            for (int l = 0; l < 16; l++) weight[l] = qw[16 * j + l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
            float sumw = 0;
            for (int l = 0; l < 16; l++) sumw += weight[l];
            sw[j] = sumw;
            scales[j] = make_qx_quants(16, 4, x + 16 * j, L + 16 * j, weight);
        }
        memset(y[i].scales, 0, sizeof y[i].scales);
        const float d_block = make_qx_quants(QK_K / 16, 32, scales, Ls, sw);
        for (int j = 0; j < QK_K / 16; j++) {
            int l = Ls[j];
            if (j < 8) y[i].scales[j] = (uint8_t)(l & 0xF);
            else y[i].scales[j - 8] = (uint8_t)(y[i].scales[j - 8] | ((l & 0xF) << 4));
            l >>= 4;
            y[i].scales[j % 4 + 8] = (uint8_t)(y[i].scales[j % 4 + 8] | (l << (2 * (j / 4))));
        }
        y[i].d = qk_fp32_to_fp16(d_block);
        q3_K_finish(x, &y[i], L);
    }
}

void qk_dequantize_row_q3_K(const void *vx, float *y, int64_t n) {
    QK_CHECK_ROW(n, QK_K);
    const blk_q3_K *x = (const blk_q3_K *)vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d_all = qk_fp16_to_fp32(x[i].d);
        const uint8_t *sb = x[i].scales;
        int8_t sc[16];
        for (int j = 0; j < 16; j++) {
            const int lo = j < 8 ? sb[j] & 0xF : sb[j - 8] >> 4;
            const int hi = (sb[8 + j % 4] >> (2 * (j / 4))) & 3;
            sc[j] = (int8_t)((lo | hi << 4) - 32);
        }
        const uint8_t *q = x[i].qs;
        const uint8_t *hm = x[i].hmask;
        int is = 0;
        uint8_t m = 1;
        for (int nn = 0; nn < QK_K; nn += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1)) {
                for (int half = 0; half < 2; half++) {
                    const float dl = d_all * (float)sc[is++];
                    for (int l = 0; l < 16; l++) {
                        const int k = l + 16 * half;
                        const int v = ((q[k] >> shift) & 3) - ((hm[k] & m) ? 0 : 4);
                        *y++ = dl * (float)v;
                    }
                }
            }
        }
    }
}

// ---- Q4_K / Q5_K shared scale fitting ----

static void k4_pack_scales(uint8_t *scales_out, const uint8_t *Ls, const uint8_t *Lm);
static void k4_requantize(const float *x, int nmax, uint8_t *L, const uint8_t *scales_out, uint16_t dh, uint16_t dminh);

/* Per 32-sub-block fit with weights av + |x| (av = rms of the sub-block), then the 6-bit
 * quantization of the 8 scales and mins into y->scales and fp16 d/dmin. nmax 15 or 31. */
static void fit_k4_scales(const float *x, int nmax, float rmin, int nstep, uint8_t *L, uint8_t *scales_out,
                          uint16_t *d_out, uint16_t *dmin_out) {
    uint8_t Laux[32];
    float weights[32], mins[QK_K / 32], scales[QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f,
                                     nstep, 0);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t Ls[QK_K / 32], Lm[QK_K / 32];
    for (int j = 0; j < QK_K / 32; j++) {
        Ls[j] = (uint8_t)qk_nint(inv_scale * scales[j]);   /* negative wraps, then min(63) */
        Lm[j] = (uint8_t)qk_nint(inv_min * mins[j]);
    }
    k4_pack_scales(scales_out, Ls, Lm);
    *d_out = qk_fp32_to_fp16(max_scale / 63.f);
    *dmin_out = qk_fp32_to_fp16(max_min / 63.f);
    k4_requantize(x, nmax, L, scales_out, *d_out, *dmin_out);
}

/* quantize_row_q4_K_impl / q5_K_impl's fit: weights qw*sqrt(σ² + x²) with σ² = 2Σx²/256,
 * make_qkx3 per 32, the 8 scales and 8 mins by make_qp_quants(8, 63, ..., Σw). */
static void fit_k4_scales_imatrix(const float *x, const float *qw, int nmax, uint8_t *L, uint8_t *scales_out,
                                  uint16_t *d_out, uint16_t *dmin_out) {
    uint8_t Ls[QK_K / 32], Lm[QK_K / 32];
    float weights[32], sw[QK_K / 32], mins[QK_K / 32], scales[QK_K / 32];
    const float sigma2 = 2 * sum_sq(QK_K, x) / QK_K;
    for (int j = 0; j < QK_K / 32; j++) {
        for (int l = 0; l < 32; l++) weights[l] = qw[32 * j + l] * sqrtf(sigma2 + x[32 * j + l] * x[32 * j + l]);
        float sumw = 0;
        for (int l = 0; l < 32; l++) sumw += weights[l];
        sw[j] = sumw;
        scales[j] = make_qkx3_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j]);
    }
    const float d_block = make_qp_quants(QK_K / 32, 63, scales, Ls, sw);
    const float m_block = make_qp_quants(QK_K / 32, 63, mins, Lm, sw);
    k4_pack_scales(scales_out, Ls, Lm);
    *d_out = qk_fp32_to_fp16(d_block);
    *dmin_out = qk_fp32_to_fp16(m_block);
    k4_requantize(x, nmax, L, scales_out, *d_out, *dmin_out);
}

/* The 6-bit scales Ls and mins Lm (each min(63) first) into the 12-byte packing. */
static void k4_pack_scales(uint8_t *scales_out, const uint8_t *Ls, const uint8_t *Lm) {
    for (int j = 0; j < QK_K / 32; j++) {
        const uint8_t ls = QK_MIN(63, Ls[j]), lm = QK_MIN(63, Lm[j]);
        if (j < 4) {
            scales_out[j] = ls;
            scales_out[j + 4] = lm;
        } else {
            scales_out[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            scales_out[j - 4] = (uint8_t)(scales_out[j - 4] | ((ls >> 4) << 6));
            scales_out[j] = (uint8_t)(scales_out[j] | ((lm >> 4) << 6));
        }
    }
}

/* Requantize against the stored (rounded) scales; a zero scale keeps the first-pass L. */
static void k4_requantize(const float *x, int nmax, uint8_t *L, const uint8_t *scales_out, uint16_t dh, uint16_t dminh) {
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        get_scale_min_k4(j, scales_out, &sc, &m);
        const float d = qk_fp16_to_fp32(dh) * (float)sc;
        if (!d) continue;
        const float dm = qk_fp16_to_fp32(dminh) * (float)m;
        for (int ii = 0; ii < 32; ii++) {
            const int l = qk_nint((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)QK_MAX(0, QK_MIN(nmax, l));
        }
    }
}

// ---- Q4_K ----

/* qw == NULL: quantize_row_q4_K_ref; else quantize_row_q4_K_impl with weights qw (per element). */
static void q4_K_rows(const float *x, void *vy, int64_t n, const float *qw) {
    QK_CHECK_ROW(n, QK_K);
    blk_q4_K *y = (blk_q4_K *)vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        if (qw) fit_k4_scales_imatrix(x, qw + QK_K * i, 15, L, y[i].scales, &y[i].d, &y[i].dmin);
        else fit_k4_scales(x, 15, -1.f, 20, L, y[i].scales, &y[i].d, &y[i].dmin);
        uint8_t *q = y[i].qs;
        for (int j = 0; j < QK_K; j += 64, q += 32) {
            for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
        }
    }
}

void qk_quantize_row_q4_K_ref(const float *x, void *vy, int64_t n) { q4_K_rows(x, vy, n, NULL); }

void qk_quantize_row_q4_K_imatrix(const float *x, void *vy, int64_t n, const float *qw) { q4_K_rows(x, vy, n, qw); }

void qk_dequantize_row_q4_K(const void *vx, float *y, int64_t n) {
    QK_CHECK_ROW(n, QK_K);
    const blk_q4_K *x = (const blk_q4_K *)vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *q = x[i].qs;
        const float d = qk_fp16_to_fp32(x[i].d);
        const float min = qk_fp16_to_fp32(x[i].dmin);
        int is = 0;
        uint8_t sc, m;
        for (int j = 0; j < QK_K; j += 64, q += 32, is += 2) {
            get_scale_min_k4(is, x[i].scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = min * (float)m;
            get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = min * (float)m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

// ---- Q5_K ----

static void q5_K_rows(const float *x, void *vy, int64_t n, const float *qw);

void qk_quantize_row_q5_K_ref(const float *x, void *vy, int64_t n) { q5_K_rows(x, vy, n, NULL); }

void qk_quantize_row_q5_K_imatrix(const float *x, void *vy, int64_t n, const float *qw) { q5_K_rows(x, vy, n, qw); }

/* qw == NULL: quantize_row_q5_K_ref; else quantize_row_q5_K_impl. */
static void q5_K_rows(const float *x, void *vy, int64_t n, const float *qw) {
    QK_CHECK_ROW(n, QK_K);
    blk_q5_K *y = (blk_q5_K *)vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        if (qw) fit_k4_scales_imatrix(x, qw + QK_K * i, 31, L, y[i].scales, &y[i].d, &y[i].dmin);
        else fit_k4_scales(x, 31, -0.5f, 15, L, y[i].scales, &y[i].d, &y[i].dmin);
        uint8_t *qh = y[i].qh, *ql = y[i].qs;
        memset(qh, 0, QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int nn = 0; nn < QK_K; nn += 64, ql += 32) {
            for (int j = 0; j < 32; j++) {
                int l1 = L[nn + j];
                if (l1 > 15) { l1 -= 16; qh[j] |= m1; }
                int l2 = L[nn + j + 32];
                if (l2 > 15) { l2 -= 16; qh[j] |= m2; }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
        }
    }
}

void qk_dequantize_row_q5_K(const void *vx, float *y, int64_t n) {
    QK_CHECK_ROW(n, QK_K);
    const blk_q5_K *x = (const blk_q5_K *)vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        const float d = qk_fp16_to_fp32(x[i].d);
        const float min = qk_fp16_to_fp32(x[i].dmin);
        int is = 0;
        uint8_t sc, m, u1 = 1, u2 = 2;
        for (int j = 0; j < QK_K; j += 64, ql += 32, is += 2) {
            get_scale_min_k4(is, x[i].scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = min * (float)m;
            get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = min * (float)m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            u1 = (uint8_t)(u1 << 2);
            u2 = (uint8_t)(u2 << 2);
        }
    }
}

// ---- Q6_K ----

static void q6_K_rows(const float *x, void *vy, int64_t n, const float *qw);

void qk_quantize_row_q6_K_ref(const float *x, void *vy, int64_t n) { q6_K_rows(x, vy, n, NULL); }

/* quantize_row_q6_K_impl: make_qx_quants weighted by qw itself (not qw*sqrt(σ²+x²)). */
void qk_quantize_row_q6_K_imatrix(const float *x, void *vy, int64_t n, const float *qw) { q6_K_rows(x, vy, n, qw); }

static void q6_K_rows(const float *x, void *vy, int64_t n, const float *qw) {
    QK_CHECK_ROW(n, QK_K);
    blk_q6_K *y = (blk_q6_K *)vy;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        for (int ib = 0; ib < QK_K / 16; ib++)
            scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, qw ? qw + QK_K * i + 16 * ib : NULL);
        const float max_scale = qk_signed_absmax(QK_K / 16, scales);
        if (fabsf(max_scale) < QK_GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof y[i]);   /* d = F16(0) = 0 as well */
            continue;
        }
        const float iscale = -128.f / max_scale;
        y[i].d = qk_fp32_to_fp16(1 / iscale);
        for (int ib = 0; ib < QK_K / 16; ib++) {
            y[i].scales[ib] = (int8_t)QK_MIN(127, qk_nint(iscale * scales[ib]));
        }
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = qk_fp16_to_fp32(y[i].d) * (float)y[i].scales[j];
            if (!d) continue;
            for (int ii = 0; ii < 16; ii++) {
                const int l = qk_nint(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(QK_MAX(-32, QK_MIN(31, l)) + 32);
            }
        }
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
                ql[l] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                  ((L[j + l + 96] >> 4) << 6));
            }
        }
    }
}

void qk_dequantize_row_q6_K(const void *vx, float *y, int64_t n) {
    QK_CHECK_ROW(n, QK_K);
    const blk_q6_K *x = (const blk_q6_K *)vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = qk_fp16_to_fp32(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int nn = 0; nn < QK_K; nn += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * (float)sc[is] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}
