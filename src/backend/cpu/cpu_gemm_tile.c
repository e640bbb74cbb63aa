/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cpu/cpu_gemm_tile.c — prefill GEMM through decoded, row-interleaved weight tiles
 * (AVX-512VL + VNNI, 256-bit vectors). For T >= CPU_TILE_MIN_T tokens this replaces the
 * per-row dot kernels of cpu_x86.inc, whose float tail (cvt + 2 multiplies per block, row and
 * token) capped them at ~5-7 int8 MACs per vector op.
 * Layer 0 (backend/cpu).
 * Scheme (all weight types alike): every weight element is decoded once per call into an
 * unsigned byte q (= the type's integer value + off, 0..255), and every unit of U elements
 * (U = 16 or 32: the type's scale granularity) gets a float scale ws and a float min wm, so that
 *     w = ws * (q - off) + wm                                       (per element of the unit)
 * e.g. Q5_0: q = 5-bit value, off 16, ws = d; Q4_K: q = nibble, off 0, ws = d*sc_j,
 * wm = -dmin*m_j; Q8_0/IQ4: q = value + 128, off 128. Activations are copied to plain int8 rows
 * with per-unit sums S = sum(y) and scales A (Q8_0/Q8_1: the block d; Q8_K: the superblock d).
 *     out[t][r] = sum_u A_tu * (ws_ru * (I_rtu - off*S_tu) + wm_ru * S_tu),  I = sum q*y (exact int)
 * Tile layout: 8 rows interleaved in 4-byte groups, [K/4][8 rows][4 B], so one vpdpbusd with a
 * broadcast activation dword advances 8 rows x 4 elements; per unit and token the float work is
 * one cvt + mul + fma for 8 rows (vs 8 rows x 3 ops in the row kernels).
 * Exactness: I - off*S is exact in int32; results differ from the row kernels only in float
 * rounding order (the S-based min term uses the exact Σy instead of Q8_1's fp16 s).
 * Memory: per call T*K*(1 + 8/U) bytes of activation copies + ~(16K + 10K/U*4) bytes per thread,
 * allocated per call (prefill only; the T = 1 decode path allocates nothing).
 * Non-goals: persistent repacking (tiles are decoded per call into per-thread scratch), GEMV.
 */
#include "cpu_impl.h"

#include "quant/blocks.h"
#include "quant/fp16.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

/* The ISA is scoped to this file: GCC takes a target pragma, clang an attribute push applied to
 * every function defined below (headers are included first so they are not affected). */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"))), apply_to = function)
#else
#pragma GCC target("avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
#endif

#define H(x) cpu_fp16_table[x]

// ---- per-type row decode: q[K] (u8), ws[K/U], wm[K/U] ----

typedef struct {
    int unit;  /* U */
    int off;   /* subtracted from q */
    int has_min;
} tile_spec;

static bool spec_of(int wt, tile_spec *s) {
    switch (wt) {
    case SB_TYPE_Q4_0: *s = (tile_spec){32, 8, 0}; return true;
    case SB_TYPE_Q5_0: *s = (tile_spec){32, 16, 0}; return true;
    case SB_TYPE_Q8_0: *s = (tile_spec){32, 128, 0}; return true;
    case SB_TYPE_IQ4_NL: *s = (tile_spec){32, 128, 0}; return true;
    case SB_TYPE_Q4_1: *s = (tile_spec){32, 0, 1}; return true;
    case SB_TYPE_Q5_1: *s = (tile_spec){32, 0, 1}; return true;
    case SB_TYPE_Q4_K: *s = (tile_spec){32, 0, 1}; return true;
    case SB_TYPE_Q5_K: *s = (tile_spec){32, 0, 1}; return true;
    case SB_TYPE_IQ4_XS: *s = (tile_spec){32, 128, 0}; return true;
    case SB_TYPE_Q2_K: *s = (tile_spec){16, 0, 1}; return true;
    case SB_TYPE_Q3_K: *s = (tile_spec){16, 4, 0}; return true;
    case SB_TYPE_Q6_K: *s = (tile_spec){16, 32, 0}; return true;
    default: return false;
    }
}


// ---- SIMD decode helpers (decode cost matters for T ~ 8..64) ----

static inline __m256i nib32(const uint8_t *p) {
    __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
    b = _mm256_srlv_epi64(b, _mm256_set_epi64x(4, 4, 0, 0));
    return _mm256_and_si256(b, _mm256_set1_epi8(15));
}

static inline __m256i kv_u8(__m256i idx) { /* kvalues_iq4nl[idx] + 128 */
    const __m128i kv = _mm_xor_si128(_mm_loadu_si128((const __m128i *)kvalues_iq4nl), _mm_set1_epi8((char)0x80));
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(kv), idx);
}

static inline void st32(uint8_t *q, __m256i v) { _mm256_storeu_si256((__m256i *)q, v); }

bool cpu_tile_supported(int wtype) {
    tile_spec s;
    return spec_of(wtype, &s);
}

static inline void k4_scale_min(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static void decode_row(int wt, const void *w, int64_t K, uint8_t *q, float *ws, float *wm) {
    switch (wt) {
    case SB_TYPE_Q4_0:
    case SB_TYPE_Q4_1:
    case SB_TYPE_IQ4_NL: {
        const size_t bs = wt == SB_TYPE_Q4_1 ? sizeof(blk_q4_1) : sizeof(blk_q4_0);
        for (int64_t b = 0; b < K / 32; b++) {
            const unsigned char *blk = (const unsigned char *)w + b * bs;
            const uint8_t *qs = blk + (wt == SB_TYPE_Q4_1 ? 4 : 2);
            uint16_t d, m = 0;
            memcpy(&d, blk, 2);
            if (wt == SB_TYPE_Q4_1) memcpy(&m, blk + 2, 2);
            st32(q + 32 * b, wt == SB_TYPE_IQ4_NL ? kv_u8(nib32(qs)) : nib32(qs));
            ws[b] = H(d);
            wm[b] = wt == SB_TYPE_Q4_1 ? H(m) : 0.0f;
        }
        break;
    }
    case SB_TYPE_Q5_0:
    case SB_TYPE_Q5_1: {
        const size_t bs = wt == SB_TYPE_Q5_1 ? sizeof(blk_q5_1) : sizeof(blk_q5_0);
        for (int64_t b = 0; b < K / 32; b++) {
            const unsigned char *blk = (const unsigned char *)w + b * bs;
            const int o = wt == SB_TYPE_Q5_1 ? 4 : 2;
            uint16_t d, m = 0;
            uint32_t qh;
            memcpy(&d, blk, 2);
            if (wt == SB_TYPE_Q5_1) memcpy(&m, blk + 2, 2);
            memcpy(&qh, blk + o, 4);
            const uint8_t *qs = blk + o + 4;
            const __m256i lo = nib32(qs);
            st32(q + 32 * b, _mm256_mask_add_epi8(lo, (__mmask32)qh, lo, _mm256_set1_epi8(16)));
            ws[b] = H(d);
            wm[b] = wt == SB_TYPE_Q5_1 ? H(m) : 0.0f;
        }
        break;
    }
    case SB_TYPE_Q8_0: {
        const blk_q8_0 *x = w;
        for (int64_t b = 0; b < K / 32; b++) {
            st32(q + 32 * b, _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)x[b].qs), _mm256_set1_epi8((char)0x80)));
            ws[b] = H(x[b].d);
            wm[b] = 0.0f;
        }
        break;
    }
    case SB_TYPE_Q4_K:
    case SB_TYPE_Q5_K: {
        for (int64_t b = 0; b < K / QK_K; b++) {
            const unsigned char *blk = (const unsigned char *)w + b * (wt == SB_TYPE_Q4_K ? sizeof(blk_q4_K) : sizeof(blk_q5_K));
            uint16_t d, dmin;
            memcpy(&d, blk, 2);
            memcpy(&dmin, blk + 2, 2);
            const uint8_t *scales = blk + 4;
            const uint8_t *qh = wt == SB_TYPE_Q5_K ? blk + 16 : NULL;
            const uint8_t *qs = blk + (wt == SB_TYPE_Q5_K ? 48 : 16);
            for (int j = 0; j < 8; j++) {
                int sc, m;
                k4_scale_min(j, scales, &sc, &m);
                ws[8 * b + j] = H(d) * (float)sc;
                wm[8 * b + j] = -(H(dmin) * (float)m);
                const __m256i qb = _mm256_loadu_si256((const __m256i *)(qs + 32 * (j / 2)));
                __m256i v = _mm256_and_si256(_mm256_srli_epi16(qb, 4 * (j % 2)), _mm256_set1_epi8(15));
                if (qh) {
                    const __m256i hb = _mm256_loadu_si256((const __m256i *)qh);
                    v = _mm256_or_si256(v, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, j), _mm256_set1_epi8(1)), 4));
                }
                st32(q + 256 * b + 32 * j, v);
            }
        }
        break;
    }
    case SB_TYPE_Q6_K: {
        const blk_q6_K *x = w;
        for (int64_t b = 0; b < K / QK_K; b++) {
            const __m256i m4 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3);
            for (int n = 0; n < 2; n++) {
                const __m256i l0 = _mm256_loadu_si256((const __m256i *)(x[b].ql + 64 * n));
                const __m256i l1 = _mm256_loadu_si256((const __m256i *)(x[b].ql + 64 * n + 32));
                const __m256i hb = _mm256_loadu_si256((const __m256i *)(x[b].qh + 32 * n));
                uint8_t *o = q + 256 * b + 128 * n;
                st32(o, _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4)));
                st32(o + 32, _mm256_or_si256(_mm256_and_si256(l1, m4),
                                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m3), 4)));
                st32(o + 64, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m3), 4)));
                st32(o + 96, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m3), 4)));
            }
            for (int j = 0; j < 16; j++) ws[16 * b + j] = H(x[b].d) * (float)x[b].scales[j], wm[16 * b + j] = 0.0f;
        }
        break;
    }
    case SB_TYPE_Q3_K: {
        const blk_q3_K *x = w;
        for (int64_t b = 0; b < K / QK_K; b++) {
            const uint8_t *sc = x[b].scales;
            for (int j = 0; j < 16; j++) {
                int lo = j < 8 ? sc[j] & 15 : sc[j - 8] >> 4;
                int hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
                ws[16 * b + j] = H(x[b].d) * (float)((lo | hi << 4) - 32);
                wm[16 * b + j] = 0.0f;
            }
            for (int e = 0; e < 256; e++) {
                int low = (x[b].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
                int h = (x[b].hmask[e % 32] >> (e / 32)) & 1;
                q[256 * b + e] = (uint8_t)(low | h << 2);
            }
        }
        break;
    }
    case SB_TYPE_Q2_K: {
        const blk_q2_K *x = w;
        for (int64_t b = 0; b < K / QK_K; b++) {
            for (int j = 0; j < 16; j++) {
                ws[16 * b + j] = H(x[b].d) * (float)(x[b].scales[j] & 15);
                wm[16 * b + j] = -(H(x[b].dmin) * (float)(x[b].scales[j] >> 4));
            }
            for (int e = 0; e < 256; e++)
                q[256 * b + e] = (uint8_t)((x[b].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3);
        }
        break;
    }
    case SB_TYPE_IQ4_XS: {
        const blk_iq4_xs *x = w;
        for (int64_t b = 0; b < K / QK_K; b++) {
            for (int ib = 0; ib < 8; ib++) {
                int ls = ((x[b].scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((x[b].scales_h >> (2 * ib)) & 3) << 4);
                ws[8 * b + ib] = H(x[b].d) * (float)(ls - 32);
                wm[8 * b + ib] = 0.0f;
                for (int j = 0; j < 16; j++) {
                    q[256 * b + 32 * ib + j] = (uint8_t)(kvalues_iq4nl[x[b].qs[16 * ib + j] & 15] + 128);
                    q[256 * b + 32 * ib + j + 16] = (uint8_t)(kvalues_iq4nl[x[b].qs[16 * ib + j] >> 4] + 128);
                }
            }
        }
        break;
    }
    default: break;
    }
}

// ---- activation preparation ----

/* y8[t][K] int8, S[t][K/U] = sum of the unit, A[t][K/U] = activation scale of the unit. */
static void prep_act(int at, const void *act, size_t arow, int64_t K, int64_t T, int U, int8_t *y8, int32_t *S,
                     float *A) {
    const int64_t nu = K / U;
    for (int64_t t = 0; t < T; t++) {
        const unsigned char *row = (const unsigned char *)act + t * arow;
        int8_t *y = y8 + t * K;
        if (at == SB_TYPE_Q8_K) {
            const blk_q8_K *b = (const blk_q8_K *)row;
            for (int64_t s = 0; s < K / QK_K; s++) memcpy(y + 256 * s, b[s].qs, 256);
            for (int64_t u = 0; u < nu; u++) A[t * nu + u] = b[u * U / QK_K].d;
        } else {
            const size_t bs = at == SB_TYPE_Q8_1 ? sizeof(blk_q8_1) : sizeof(blk_q8_0);
            const int o = at == SB_TYPE_Q8_1 ? 4 : 2;
            for (int64_t s = 0; s < K / 32; s++) {
                uint16_t d;
                memcpy(&d, row + s * bs, 2);
                memcpy(y + 32 * s, row + s * bs + o, 32);
                A[t * nu + s] = H(d); /* U = 32 for every Q8_0/Q8_1-paired type */
            }
        }
        for (int64_t u = 0; u < nu; u++) {
            int sum = 0;
            for (int e = 0; e < U; e++) sum += y[u * U + e];
            S[t * nu + u] = sum;
        }
    }
}

// ---- the 8-row x NC-token microkernel ----

/* Tokens per microkernel call. 8 independent vpdpbusd chains (latency ~5 cycles, 2 per cycle)
 * keep the VNNI ports busy; with 4 the kernel was latency-bound at ~20 MACs/cycle. AVX-512VL
 * gives 32 ymm registers: 8 int + 8 float accumulators fit. */
#define TILE_NC 8

typedef struct {
    const uint8_t *tile; /* [K/4][8][4] */
    const float *ws, *wm; /* [nu][8] */
    const int8_t *y8;
    const int32_t *S;
    const float *A;
    int64_t K, nu;
    int U, off, has_min;
} tile_args;

static inline __attribute__((always_inline)) void micro(const tile_args *g, int64_t t0, const int NC, __m256 *res) {
    __m256 facc[TILE_NC];
    for (int c = 0; c < NC; c++) facc[c] = _mm256_setzero_ps();
    const int gpu = g->U / 4;
    for (int64_t u = 0; u < g->nu; u++) {
        __m256i iacc[TILE_NC];
        for (int c = 0; c < NC; c++) iacc[c] = _mm256_setzero_si256();
        const uint8_t *wt = g->tile + u * gpu * 32;
        for (int k = 0; k < gpu; k++) {
            const __m256i w = _mm256_loadu_si256((const __m256i *)(wt + 32 * k));
            for (int c = 0; c < NC; c++) {
                int32_t yy;
                memcpy(&yy, g->y8 + (t0 + c) * g->K + u * g->U + 4 * k, 4);
                iacc[c] = _mm256_dpbusd_epi32(iacc[c], w, _mm256_set1_epi32(yy));
            }
        }
        const __m256 ws = _mm256_loadu_ps(g->ws + 8 * u);
        for (int c = 0; c < NC; c++) {
            const int32_t s = g->S[(t0 + c) * g->nu + u];
            const float a = g->A[(t0 + c) * g->nu + u];
            const __m256i iv = _mm256_sub_epi32(iacc[c], _mm256_set1_epi32(g->off * s));
            facc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iv), _mm256_mul_ps(ws, _mm256_set1_ps(a)), facc[c]);
        }
        if (g->has_min) {
            const __m256 wm = _mm256_loadu_ps(g->wm + 8 * u);
            for (int c = 0; c < NC; c++) {
                const float as = g->A[(t0 + c) * g->nu + u] * (float)g->S[(t0 + c) * g->nu + u];
                facc[c] = _mm256_fmadd_ps(wm, _mm256_set1_ps(as), facc[c]);
            }
        }
    }
    for (int c = 0; c < NC; c++) res[c] = facc[c];
}

// ---- driver ----

typedef struct {
    int wt, at;
    tile_spec sp;
    const char *W;
    size_t wrow;
    int64_t K, N, T;
    const int8_t *y8;
    const int32_t *S;
    const float *A;
    float *out;
    unsigned char *scratch; /* per thread: scratch_bytes each */
    size_t scratch_bytes;
} tile_ctx;

/* Per-thread scratch: tile [8K] | q rows [8K] | ws, wm [8 nu] | rs, rm [nu], 64-byte aligned parts. */
static size_t scratch_size(int64_t K, int64_t nu) {
    size_t a = ((size_t)(8 * K) + 63) & ~(size_t)63, f = ((sizeof(float) * (size_t)(8 * nu)) + 63) & ~(size_t)63;
    size_t g = ((sizeof(float) * (size_t)nu) + 63) & ~(size_t)63;
    return 2 * a + 2 * f + 2 * g;
}

static void tile_rows(void *vctx, int64_t r0, int64_t r1, int tid) {
    const tile_ctx *c = vctx;
    const int64_t K = c->K, nu = K / c->sp.unit;
    const size_t a = ((size_t)(8 * K) + 63) & ~(size_t)63, f = ((sizeof(float) * (size_t)(8 * nu)) + 63) & ~(size_t)63;
    const size_t gsz = ((sizeof(float) * (size_t)nu) + 63) & ~(size_t)63;
    unsigned char *base = c->scratch + (size_t)tid * c->scratch_bytes;
    uint8_t *tile = base, *q = base + a;
    float *ws = (float *)(base + 2 * a), *wm = (float *)(base + 2 * a + f);
    float *rs = (float *)(base + 2 * a + 2 * f), *rm = (float *)(base + 2 * a + 2 * f + gsz);
    for (int64_t rb = r0; rb < r1; rb += 8) {
        const int nr = r1 - rb < 8 ? (int)(r1 - rb) : 8;
        for (int r = 0; r < 8; r++) {
            if (r < nr) {
                decode_row(c->wt, c->W + (rb + r) * c->wrow, K, q + r * K, rs, rm);
            } else {
                memset(q + r * K, 0, (size_t)K);
                memset(rs, 0, sizeof(float) * (size_t)nu);
                memset(rm, 0, sizeof(float) * (size_t)nu);
            }
            for (int64_t u = 0; u < nu; u++) ws[8 * u + r] = rs[u], wm[8 * u + r] = rm[u];
        }
        /* interleave: 8x8 dword transpose per 32 elements -> [K/4][8 rows][4 B] */
        for (int64_t e = 0; e < K; e += 32) {
            __m256i t[8], v[8];
            for (int r = 0; r < 8; r++) v[r] = _mm256_loadu_si256((const __m256i *)(q + r * K + e));
            for (int r = 0; r < 8; r += 2) {
                t[r] = _mm256_unpacklo_epi32(v[r], v[r + 1]);
                t[r + 1] = _mm256_unpackhi_epi32(v[r], v[r + 1]);
            }
            const __m256i u0 = _mm256_unpacklo_epi64(t[0], t[2]), u1 = _mm256_unpackhi_epi64(t[0], t[2]);
            const __m256i u2 = _mm256_unpacklo_epi64(t[1], t[3]), u3 = _mm256_unpackhi_epi64(t[1], t[3]);
            const __m256i u4 = _mm256_unpacklo_epi64(t[4], t[6]), u5 = _mm256_unpackhi_epi64(t[4], t[6]);
            const __m256i u6 = _mm256_unpacklo_epi64(t[5], t[7]), u7 = _mm256_unpackhi_epi64(t[5], t[7]);
            uint8_t *o = tile + e * 8;
            st32(o + 0 * 32, _mm256_permute2x128_si256(u0, u4, 0x20));
            st32(o + 1 * 32, _mm256_permute2x128_si256(u1, u5, 0x20));
            st32(o + 2 * 32, _mm256_permute2x128_si256(u2, u6, 0x20));
            st32(o + 3 * 32, _mm256_permute2x128_si256(u3, u7, 0x20));
            st32(o + 4 * 32, _mm256_permute2x128_si256(u0, u4, 0x31));
            st32(o + 5 * 32, _mm256_permute2x128_si256(u1, u5, 0x31));
            st32(o + 6 * 32, _mm256_permute2x128_si256(u2, u6, 0x31));
            st32(o + 7 * 32, _mm256_permute2x128_si256(u3, u7, 0x31));
        }
        tile_args g = {tile, ws, wm, c->y8, c->S, c->A, K, nu, c->sp.unit, c->sp.off, c->sp.has_min};
        for (int64_t t = 0; t < c->T; t += TILE_NC) {
            const int nc = c->T - t < TILE_NC ? (int)(c->T - t) : TILE_NC;
            __m256 res[TILE_NC];
            switch (nc) {
            case 1: micro(&g, t, 1, res); break;
            case 2: micro(&g, t, 2, res); break;
            case 3: micro(&g, t, 3, res); break;
            case 4: micro(&g, t, 4, res); break;
            case 5: micro(&g, t, 5, res); break;
            case 6: micro(&g, t, 6, res); break;
            case 7: micro(&g, t, 7, res); break;
            default: micro(&g, t, 8, res); break;
            }
            for (int k = 0; k < nc; k++) {
                float *o = c->out + (t + k) * c->N + rb;
                if (nr == 8) {
                    _mm256_storeu_ps(o, res[k]);
                } else {
                    float tmp[8];
                    _mm256_storeu_ps(tmp, res[k]);
                    memcpy(o, tmp, sizeof(float) * (size_t)nr);
                }
            }
        }
    }
}

sb_status cpu_tile_matmul(tp_pool *pool, int wt, int at, const void *W, size_t wrow, int64_t K, int64_t N,
                          const void *act, size_t arow, int64_t T, float *out) {
    tile_spec sp;
    if (!spec_of(wt, &sp)) return sb_fail(SB_ERR_INTERNAL, "cpu_tile_matmul: type %d has no tile decoder", wt);
    const int64_t nu = K / sp.unit;
    const size_t sb = scratch_size(K, nu), nth = (size_t)tp_threads(pool);
    int8_t *y8 = malloc((size_t)(T * K));
    int32_t *S = malloc(sizeof(int32_t) * (size_t)(T * nu));
    float *A = malloc(sizeof(float) * (size_t)(T * nu));
    unsigned char *scratch = aligned_alloc(64, sb * nth);
    if (!y8 || !S || !A || !scratch) {
        free(y8), free(S), free(A), free(scratch);
        return sb_fail(SB_ERR_OOM, "cpu_matmul: %zu bytes of prefill scratch (T = %lld, K = %lld)",
                       (size_t)(T * K) + 8 * (size_t)(T * nu) + sb * nth, (long long)T, (long long)K);
    }
    prep_act(at, act, arow, K, T, sp.unit, y8, S, A);
    tile_ctx c = {wt, at, sp, W, wrow, K, N, T, y8, S, A, out, scratch, sb};
    tp_run(pool, N, 8, tile_rows, &c);
    free(y8), free(S), free(A), free(scratch);
    return SB_OK;
}

#if defined(__clang__)
#pragma clang attribute pop
#endif
