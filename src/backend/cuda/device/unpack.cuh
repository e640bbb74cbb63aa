/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/unpack.cuh — one 32-value sub-block of a quantized weight row unpacked to 32
 * signed int8 (8 packed ints, element order) plus its scales, and one activation sub-block of a
 * q8_1 / q8_K row: the operands of the int8 tensor-core GEMM (k_mma.cu).
 * Layer 0 (backend/cuda), device code only. Invariants: the same rules as k_mmvq.cu's dp4a dots
 * (formats.md §2): Q4_0 q-8, Q5_0 q-16, Q8_0 q (d0 = d1 = d); Q4_1 / Q5_1 q (d0 = d1 = d, dm = m);
 * IQ4_NL / IQ4_XS the code point kvalues[q] (d0 = d1 = d, or d*(ls-32) for IQ4_XS); Q4_K/Q5_K q
 * (d0 = d1 = d*sc_j, dm = -dmin*m_j, applied to the activation sum); Q6_K q-32 (d0/d1 =
 * d*scales[2j], d*scales[2j+1] for the two 16-value halves); Q3_K q3-4*(1-hbit) (d0/d1 = d*(sc-32)
 * of the halves); Q2_K q (d0/d1 = d*(sc&15) of the halves, and per-half mins dm/dm1 =
 * -dmin*(sc>>4): the only type with two min terms, cu_wsub.dm1). Each d0*w + dm is the dequantizer's
 * own f32 product (common.cuh cu_deq1, quant/*.c), offsets stay in the integer domain (exact).
 * Host-tested under tests/codegen/emu (test_cuda_unpack_emu: every type's unpack against the
 * reference dequantizer, fetch+decode == unpack, aligned loads only).
 * Non-goals: types without a dp4a/mma path (F16 / BF16 / F32 take the f32 GEMV).
 */
#ifndef SB_BACKEND_CUDA_DEVICE_UNPACK_CUH
#define SB_BACKEND_CUDA_DEVICE_UNPACK_CUH

#include "backend/cuda/device/common.cuh"

typedef struct cu_wsub {
    int w[8];
    float d0, d1, dm;
    float dm1; /* Q2_K only: the second half's min (dm is the first half's); dead for every other type */
    /* the 256-value super-block types but Q2_K: d0 = dsb * isc0, d1 = dsb * isc1 (k_mma's integer sums) */
    int isc0, isc1;
    float dsb;
} cu_wsub;

/* the dp4a weight types as X(type) lists, for the kernels' type dispatch: those of 256-value
 * super-blocks, which also take q8_K activations (the CPU's pairing, so the reference's rounding),
 * and those that take q8_1 only (every dp4a type takes q8_1) */
#define CU_MMVQ_K_TYPES(X) X(CU_T_Q2_K) X(CU_T_Q3_K) X(CU_T_Q4_K) X(CU_T_Q5_K) X(CU_T_Q6_K) X(CU_T_IQ4_XS)
#define CU_MMVQ_Q81_TYPES(X) X(CU_T_Q4_0) X(CU_T_Q4_1) X(CU_T_Q5_0) X(CU_T_Q5_1) X(CU_T_Q8_0) X(CU_T_IQ4_NL)

/* the weight types cu_fetch / cu_decode / cu_unpack take (each asserts it at compile time) */
static __host__ __device__ constexpr bool cu_dp4a_type(int t) {
#define CU_X(type) t == type ||
    return CU_MMVQ_K_TYPES(CU_X) CU_MMVQ_Q81_TYPES(CU_X) false;
#undef CU_X
}

/* the IQ4 code points (cu_kvalues_iq4nl) as four little-endian words, for cu_iq4_lookup */
#define CU_IQ4_W0 0xBFAD9881u /* -127 -104  -83  -65 */
#define CU_IQ4_W1 0xF6EADDCFu /*  -49  -35  -22  -10 */
#define CU_IQ4_W2 0x26190D01u /*    1   13   25   38 */
#define CU_IQ4_W3 0x71594535u /*   53   69   89  113 */

/* four IQ4 code points at once: byte k of the result is kvalues[byte k of q] (q's bytes 0..15): the
 * low 3 bits pick a byte of one table half (__byte_perm), bit 3 picks the half */
static __device__ __forceinline__ int cu_iq4_lookup(uint32_t q) {
    const uint32_t s = q & 0x07070707u;
    const uint32_t sel = (s & 7u) | ((s >> 4) & 0x70u) | ((s >> 8) & 0x700u) | ((s >> 12) & 0x7000u);
    const uint32_t lo = __byte_perm(CU_IQ4_W0, CU_IQ4_W1, sel), hi = __byte_perm(CU_IQ4_W2, CU_IQ4_W3, sel);
    const uint32_t m = ((q >> 3) & 0x01010101u) * 0xFFu; /* 0xFF in the bytes whose index is >= 8 */
    return (int)((lo & ~m) | (hi & m));
}

/* expand 4 bits (b0..b3) into bit 4 of 4 bytes */
static __device__ __forceinline__ int cu_bits4_to_b4(uint32_t b) {
    /* bit k of b -> bit 4 of byte k: one multiply (the partial products k + 4 + 7m land on distinct
     * bits, so nothing carries into the kept bits 4, 12, 20, 28); checked against the shift/or form
     * for every 16-bit input */
    return (int)(((b & 0xFu) * 0x02040810u) & 0x10101010u);
}

/* per-byte v - k (k4 = k in every byte) for bytes v in [0, 2k), k <= 64: the same bits as
 * cu_sub_bytes(v, k4) (no byte saturates in that range) in three ALU operations instead of the
 * emulated sequence sm_80/sm_90 compile __vsubss4 to: bias every byte by 128 so no borrow crosses
 * a byte, subtract, unbias */
static __device__ __forceinline__ int cu_sub_bytes(int v, int k4) {
    return (int)((((uint32_t)v | 0x80808080u) - (uint32_t)k4) ^ 0x80808080u);
}

/* The 2-byte-aligned blocks (Q4_0 18 B, Q5_0 22 B, Q8_0 34 B) read as NW aligned 32-bit words from
 * p rounded down to 4, instead of 16-bit halves: byte 4k + c of the block (c = 0 or 2, the
 * block's own offset) is then __funnelshift_rc(w[k'], w[k'+1], 8 * ...) — cu_win. Reads at most
 * 2 bytes past the block (inside the 256-byte-padded weight buffers). */
template <int NW> static __device__ __forceinline__ unsigned cu_ld_words_a2(const uint8_t *p, uint32_t *w) {
    const uint32_t *a = (const uint32_t *)((uintptr_t)p & ~(uintptr_t)3);
#pragma unroll
    for (int k = 0; k < NW; k++) w[k] = a[k];
    return ((unsigned)(uintptr_t)p & 2u) * 8u; /* 0 or 16: the block's bit offset in w[0] */
}
/* the 32 bits at byte 4k + 2e of the block (e = 0 or 1) from cu_ld_words_a2's words and shift */
static __device__ __forceinline__ uint32_t cu_win(const uint32_t *w, int k, int e, unsigned sh) {
    return __funnelshift_rc(w[k], w[k + 1], sh + 16u * (unsigned)e);
}

/* The same unpack in two phases, so a GEMM can issue the global loads of its next K step before
 * computing the current one (software pipelining): cu_fetch loads the raw words a sub-block needs
 * into registers, cu_decode turns them into the cu_unpack result (bit-identical). Fields a type
 * does not use are dead and cost no registers. */
typedef struct cu_wraw {
    int q[9], h[8]; /* q: Q8_0's 9 unaligned words; h: Q5_K's qh, Q6_K's qh, Q3_K's hmask */
    uint32_t s0, s1, s2, s3;
} cu_wraw;

/* all-zero raw words: they decode to zero scales (no contribution) */
static __device__ __forceinline__ void cu_wraw_zero(cu_wraw *o) {
#pragma unroll
    for (int i = 0; i < 9; i++) o->q[i] = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) o->h[i] = 0;
    o->s0 = o->s1 = o->s2 = o->s3 = 0;
}

/* cu_fetch only issues loads into the fields: nothing in it uses a loaded value (combining two
 * loads there stalled the thread on the first before it issued the next fetch — the K-quants'
 * scale bytes, the 16-bit halves). The 2-byte-aligned blocks (Q4_0, Q5_0, Q8_0) are fetched as
 * aligned 32-bit words with the block's bit offset (cu_ld_words_a2; cu_decode applies cu_win): half
 * the load instructions of 16-bit halves. Q4_K / Q5_K blocks (144 / 176 bytes), and Q3_K blocks as
 * the device stores them (112 bytes, weight_layout.cuh), are whole 16-byte units in 256-byte-aligned
 * buffers (exec_cuda's cu_malloc per weight): 16-byte loads of the header (d, dmin, the 12 scale
 * bytes) and of the sub-block's 32 bytes of qs (and qh / hmask). The device's Q6_K blocks (212
 * bytes) are 4-byte aligned: 32-bit loads. */
template <int TYPE> static __device__ __forceinline__ void cu_fetch(const uint8_t *row, int j, cu_wraw *o) {
    static_assert(cu_dp4a_type(TYPE), "cu_fetch: a weight type without a dp4a path");
    if (TYPE == CU_T_Q4_0) {
        o->s1 = cu_ld_words_a2<5>(row + (uint64_t)j * sizeof(blk_q4_0), (uint32_t *)o->q);
    } else if (TYPE == CU_T_Q5_0) {
        o->s1 = cu_ld_words_a2<6>(row + (uint64_t)j * sizeof(blk_q5_0), (uint32_t *)o->q);
    } else if (TYPE == CU_T_Q8_0) {
        o->s1 = cu_ld_words_a2<9>(row + (uint64_t)j * sizeof(blk_q8_0), (uint32_t *)o->q);
    } else if (TYPE == CU_T_Q4_K || TYPE == CU_T_Q5_K) {
        const uint8_t *blk = row + (uint64_t)(j / 8) * (TYPE == CU_T_Q4_K ? sizeof(blk_q4_K) : sizeof(blk_q5_K));
        const uint8_t *qs = TYPE == CU_T_Q4_K ? ((const blk_q4_K *)blk)->qs : ((const blk_q5_K *)blk)->qs;
        const int s = j % 8;
        const int4 hd = *(const int4 *)blk; /* d | dmin << 16, then scales[0..11] */
        o->s0 = (uint32_t)hd.x, o->s1 = (uint32_t)hd.y, o->s2 = (uint32_t)hd.z, o->s3 = (uint32_t)hd.w;
        const int4 *q = (const int4 *)(qs + 32 * (s / 2));
        const int4 q0 = q[0], q1 = q[1];
        o->q[0] = q0.x, o->q[1] = q0.y, o->q[2] = q0.z, o->q[3] = q0.w, o->q[4] = q1.x, o->q[5] = q1.y, o->q[6] = q1.z, o->q[7] = q1.w;
        if (TYPE == CU_T_Q5_K) {
            const int4 *qh = (const int4 *)((const blk_q5_K *)blk)->qh;
            const int4 h0 = qh[0], h1 = qh[1];
            o->h[0] = h0.x, o->h[1] = h0.y, o->h[2] = h0.z, o->h[3] = h0.w, o->h[4] = h1.x, o->h[5] = h1.y, o->h[6] = h1.z, o->h[7] = h1.w;
        }
    } else if (TYPE == CU_T_Q6_K) { /* the device's 212-byte blocks (weight_layout.cuh): ql 0, qh 128, scales 192, d 208 */
        const blk_q6_K *b = (const blk_q6_K *)(row + (uint64_t)(j / 8) * CU_Q6_K_DEV_BYTES);
        const int s = j % 8, n = s / 4, g = s % 4;
        const int *ql = (const int *)(b->ql + 64 * n + 32 * (g & 1)), *qh = (const int *)(b->qh + 32 * n);
#pragma unroll
        for (int i = 0; i < 8; i++) o->q[i] = ql[i], o->h[i] = qh[i];
        o->s0 = b->d;
        o->s1 = *(const uint16_t *)(b->scales + 2 * s); /* scales[2s] | scales[2s + 1] << 8 */
    } else if (TYPE == CU_T_Q4_1 || TYPE == CU_T_Q5_1) { /* 20 / 24-byte blocks: 4-byte aligned words */
        const uint32_t *b = (const uint32_t *)(row + (uint64_t)j * (TYPE == CU_T_Q4_1 ? sizeof(blk_q4_1) : sizeof(blk_q5_1)));
        constexpr int NW = TYPE == CU_T_Q4_1 ? 5 : 6; /* d | m << 16, (qh,) qs */
#pragma unroll
        for (int k = 0; k < NW; k++) o->q[k] = (int)b[k];
    } else if (TYPE == CU_T_IQ4_NL) { /* 18-byte blocks: d, qs[16] — Q4_0's layout */
        o->s1 = cu_ld_words_a2<5>(row + (uint64_t)j * sizeof(blk_iq4_nl), (uint32_t *)o->q);
    } else if (TYPE == CU_T_IQ4_XS) { /* 136-byte blocks (8-byte aligned): d | scales_h << 16, scales_l, qs[16 sub-block] */
        const uint8_t *blk = row + (uint64_t)(j / 8) * sizeof(blk_iq4_xs);
        const uint2 hd = *(const uint2 *)blk;
        const uint2 *q = (const uint2 *)(blk + 8 + 16 * (j % 8));
        const uint2 q0 = q[0], q1 = q[1];
        o->s0 = hd.x, o->s1 = hd.y;
        o->q[0] = (int)q0.x, o->q[1] = (int)q0.y, o->q[2] = (int)q1.x, o->q[3] = (int)q1.y;
    } else if (TYPE == CU_T_Q3_K) { /* the device's 112-byte blocks (weight_layout.cuh): hmask 0, qs 32, scales 96, d 108 */
        const blk_q3_K *b = (const blk_q3_K *)(row + (uint64_t)(j / 8) * CU_Q3_K_DEV_BYTES);
        const int s = j % 8;
        const int4 *qs = (const int4 *)(b->qs + 32 * (s / 4)), *hm = (const int4 *)b->hmask;
        const int4 q0 = qs[0], q1 = qs[1], h0 = hm[0], h1 = hm[1];
        const int4 sd = *(const int4 *)b->scales; /* scales[0..11], d | 0 << 16 */
        o->q[0] = q0.x, o->q[1] = q0.y, o->q[2] = q0.z, o->q[3] = q0.w, o->q[4] = q1.x, o->q[5] = q1.y, o->q[6] = q1.z, o->q[7] = q1.w;
        o->h[0] = h0.x, o->h[1] = h0.y, o->h[2] = h0.z, o->h[3] = h0.w, o->h[4] = h1.x, o->h[5] = h1.y, o->h[6] = h1.z, o->h[7] = h1.w;
        o->s1 = (uint32_t)sd.x, o->s2 = (uint32_t)sd.y, o->s3 = (uint32_t)sd.z, o->s0 = (uint32_t)sd.w;
    } else if (TYPE == CU_T_Q2_K) { /* 84-byte blocks (4-byte aligned): scales[16], qs[64], d, dmin */
        const uint8_t *blk = row + (uint64_t)(j / 8) * sizeof(blk_q2_K);
        const int s = j % 8;
        const uint32_t *q = (const uint32_t *)(blk + 16 + 32 * (s / 4));
#pragma unroll
        for (int k = 0; k < 8; k++) o->q[k] = (int)q[k];
        o->s0 = *(const uint32_t *)(blk + 80);               /* d | dmin << 16 */
        o->s1 = *(const uint16_t *)(blk + 2 * s);            /* scales[2s] | scales[2s + 1] << 8 */
    }
}

template <int TYPE> static __device__ __forceinline__ void cu_decode(const cu_wraw *r, int j, cu_wsub *o) {
    static_assert(cu_dp4a_type(TYPE), "cu_decode: a weight type without a dp4a path");
    if (TYPE == CU_T_Q4_0) { /* d at byte 0, qs at 2..17 */
        const uint32_t *w = (const uint32_t *)r->q;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int q = (int)cu_win(w, i, 1, r->s1);
            o->w[i] = cu_sub_bytes(q & 0x0F0F0F0F, 0x08080808);
            o->w[i + 4] = cu_sub_bytes((q >> 4) & 0x0F0F0F0F, 0x08080808);
        }
        o->d0 = o->d1 = cu_h2f((uint16_t)cu_win(w, 0, 0, r->s1));
        o->dm = 0.0f;
    } else if (TYPE == CU_T_Q5_0) { /* d at byte 0, qh at 2..5, qs at 6..21 */
        const uint32_t *w = (const uint32_t *)r->q;
        const uint32_t qh = cu_win(w, 0, 1, r->s1);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int q = (int)cu_win(w, 1 + i, 1, r->s1);
            o->w[i] = cu_sub_bytes((q & 0x0F0F0F0F) | cu_bits4_to_b4(qh >> (4 * i)), 0x10101010);
            o->w[i + 4] = cu_sub_bytes(((q >> 4) & 0x0F0F0F0F) | cu_bits4_to_b4(qh >> (16 + 4 * i)), 0x10101010);
        }
        o->d0 = o->d1 = cu_h2f((uint16_t)cu_win(w, 0, 0, r->s1));
        o->dm = 0.0f;
    } else if (TYPE == CU_T_Q8_0) { /* d at byte 0, qs at 2..33 */
        const uint32_t *w = (const uint32_t *)r->q;
#pragma unroll
        for (int i = 0; i < 8; i++) o->w[i] = (int)cu_win(w, i, 1, r->s1);
        o->d0 = o->d1 = cu_h2f((uint16_t)cu_win(w, 0, 0, r->s1));
        o->dm = 0.0f;
    } else if (TYPE == CU_T_Q4_K || TYPE == CU_T_Q5_K) {
        const int s = j % 8, sh = 4 * (s % 2);
        /* the bytes k4_scale_min reads: x = scales[s+4], y = scales[s < 4 ? s : s-4], z = scales[s]
         * (scales[k] = byte k % 4 of s1, s2, s3 for k < 4, < 8, < 12) */
        const uint32_t wlo = s < 4 ? r->s1 : r->s2, whi = s < 4 ? r->s2 : r->s3;
        const int bs = 8 * (s & 3);
        const int x = (int)((whi >> bs) & 0xFF), y = (int)((r->s1 >> bs) & 0xFF), z = (int)((wlo >> bs) & 0xFF);
        int sc, m;
        if (s < 4) {
            sc = y & 63;
            m = x & 63;
        } else {
            sc = (x & 0xF) | ((y >> 6) << 4);
            m = (x >> 4) | ((z >> 6) << 4);
        }
#pragma unroll
        for (int i = 0; i < 8; i++) o->w[i] = (r->q[i] >> sh) & 0x0F0F0F0F;
        if (TYPE == CU_T_Q5_K) {
#pragma unroll
            for (int i = 0; i < 8; i++) o->w[i] |= (int)((((unsigned)r->h[i] >> s) & 0x01010101u) << 4);
        }
        o->dsb = cu_h2f((uint16_t)(r->s0 & 0xFFFF)), o->isc0 = o->isc1 = sc;
        o->d0 = o->d1 = o->dsb * (float)sc;
        o->dm = -cu_h2f((uint16_t)(r->s0 >> 16)) * (float)m;
    } else if (TYPE == CU_T_Q6_K) {
        const int g = (j % 8) % 4;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int lo = (r->q[i] >> (4 * (g >> 1))) & 0x0F0F0F0F;
            const int hi = (int)((((uint32_t)r->h[i] >> (2 * g)) & 0x03030303u) << 4);
            o->w[i] = cu_sub_bytes(lo | hi, 0x20202020);
        }
        const float d = cu_h2f((uint16_t)r->s0);
        o->dsb = d, o->isc0 = (int8_t)(r->s1 & 0xFF), o->isc1 = (int8_t)((r->s1 >> 8) & 0xFF);
        o->d0 = d * (float)o->isc0;
        o->d1 = d * (float)o->isc1;
        o->dm = 0.0f;
    } else if (TYPE == CU_T_Q4_1) { /* word 0: d | m << 16; words 1..4: qs */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int q = r->q[1 + i];
            o->w[i] = q & 0x0F0F0F0F;
            o->w[i + 4] = (q >> 4) & 0x0F0F0F0F;
        }
        o->d0 = o->d1 = cu_h2f((uint16_t)((uint32_t)r->q[0] & 0xFFFF));
        o->dm = cu_h2f((uint16_t)((uint32_t)r->q[0] >> 16));
    } else if (TYPE == CU_T_Q5_1) { /* word 0: d | m << 16; word 1: qh; words 2..5: qs */
        const uint32_t qh = (uint32_t)r->q[1];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int q = r->q[2 + i];
            o->w[i] = (q & 0x0F0F0F0F) | cu_bits4_to_b4(qh >> (4 * i));
            o->w[i + 4] = ((q >> 4) & 0x0F0F0F0F) | cu_bits4_to_b4(qh >> (16 + 4 * i));
        }
        o->d0 = o->d1 = cu_h2f((uint16_t)((uint32_t)r->q[0] & 0xFFFF));
        o->dm = cu_h2f((uint16_t)((uint32_t)r->q[0] >> 16));
    } else if (TYPE == CU_T_IQ4_NL) { /* d at byte 0, qs at 2..17 */
        const uint32_t *w = (const uint32_t *)r->q;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t q = cu_win(w, i, 1, r->s1);
            o->w[i] = cu_iq4_lookup(q & 0x0F0F0F0Fu);
            o->w[i + 4] = cu_iq4_lookup((q >> 4) & 0x0F0F0F0Fu);
        }
        o->d0 = o->d1 = cu_h2f((uint16_t)cu_win(w, 0, 0, r->s1));
        o->dm = 0.0f;
    } else if (TYPE == CU_T_IQ4_XS) {
        const int ib = j % 8;
        const int ls = (int)((r->s1 >> (8 * (ib / 2) + 4 * (ib % 2))) & 0xF) | (int)(((r->s0 >> (16 + 2 * ib)) & 3) << 4);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t q = (uint32_t)r->q[i];
            o->w[i] = cu_iq4_lookup(q & 0x0F0F0F0Fu);
            o->w[i + 4] = cu_iq4_lookup((q >> 4) & 0x0F0F0F0Fu);
        }
        o->dsb = cu_h2f((uint16_t)(r->s0 & 0xFFFF)), o->isc0 = o->isc1 = ls - 32;
        o->d0 = o->d1 = o->dsb * (float)(ls - 32);
        o->dm = 0.0f;
    } else if (TYPE == CU_T_Q3_K) {
        const int s = j % 8;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t lo = ((uint32_t)r->q[i] >> (2 * (s % 4))) & 0x03030303u;
            const uint32_t hb = ((uint32_t)r->h[i] >> s) & 0x01010101u;
            o->w[i] = cu_sub_bytes((int)(lo | (hb << 2)), 0x04040404); /* q - 4 where the hmask bit is clear */
        }
        /* scales 2s + h (h = 0, 1): low nibble (s < 4) or high nibble (s >= 4) of scales[2(s%4) + h]
         * (bytes 0..7: words s1, s2), high bits 2 * (s / 2) of scales[8 + 2(s%2) + h] (word s3) */
        const int sl = s < 4 ? 0 : 4, shh = 2 * (s / 2);
        const uint32_t lp = ((s % 4) < 2 ? r->s1 : r->s2) >> (16 * (s % 2)), hp = r->s3 >> (16 * (s % 2));
        const int sc0 = ((int)((lp >> sl) & 0xF) | (int)(((hp >> shh) & 3) << 4)) - 32;
        const int sc1 = ((int)((lp >> (8 + sl)) & 0xF) | (int)(((hp >> (8 + shh)) & 3) << 4)) - 32;
        const float d = cu_h2f((uint16_t)r->s0);
        o->dsb = d, o->isc0 = sc0, o->isc1 = sc1;
        o->d0 = d * (float)sc0;
        o->d1 = d * (float)sc1;
        o->dm = 0.0f;
    } else if (TYPE == CU_T_Q2_K) {
        const int s = j % 8;
#pragma unroll
        for (int i = 0; i < 8; i++) o->w[i] = (r->q[i] >> (2 * (s % 4))) & 0x03030303;
        const float d = cu_h2f((uint16_t)(r->s0 & 0xFFFF)), dmin = cu_h2f((uint16_t)(r->s0 >> 16));
        const int sc0 = (int)(r->s1 & 0xFF), sc1 = (int)((r->s1 >> 8) & 0xFF);
        o->d0 = d * (float)(sc0 & 0xF);
        o->d1 = d * (float)(sc1 & 0xF);
        o->dm = -(dmin * (float)(sc0 >> 4));
        o->dm1 = -(dmin * (float)(sc1 >> 4));
    }
}

/* sub-block j (32 values) of the row at `row`: the two phases at once (the same words and bits),
 * except Q4_K / Q5_K / Q6_K, which read their bytes directly */
template <int TYPE> static __device__ __forceinline__ void cu_unpack(const uint8_t *row, int j, cu_wsub *o) {
    static_assert(cu_dp4a_type(TYPE), "cu_unpack: a weight type without a dp4a path");
    if (TYPE == CU_T_Q4_0 || TYPE == CU_T_Q5_0 || TYPE == CU_T_Q8_0 || TYPE == CU_T_Q4_1 || TYPE == CU_T_Q5_1 || TYPE == CU_T_IQ4_NL ||
        TYPE == CU_T_IQ4_XS || TYPE == CU_T_Q3_K || TYPE == CU_T_Q2_K) {
        cu_wraw r;
        cu_fetch<TYPE>(row, j, &r);
        cu_decode<TYPE>(&r, j, o);
    } else if (TYPE == CU_T_Q4_K || TYPE == CU_T_Q5_K) {
        const int s = j % 8, sh = 4 * (s % 2);
        int sc, m;
        const uint8_t *scales, *qs;
        uint16_t d, dmin;
        if (TYPE == CU_T_Q4_K) {
            const blk_q4_K *b = (const blk_q4_K *)row + j / 8;
            scales = b->scales, qs = b->qs, d = b->d, dmin = b->dmin;
        } else {
            const blk_q5_K *b = (const blk_q5_K *)row + j / 8;
            scales = b->scales, qs = b->qs, d = b->d, dmin = b->dmin;
        }
        k4_scale_min(s, scales, &sc, &m);
        const int *q = (const int *)(qs + 32 * (s / 2));
#pragma unroll
        for (int i = 0; i < 8; i++) o->w[i] = (q[i] >> sh) & 0x0F0F0F0F;
        if (TYPE == CU_T_Q5_K) {
            const int *qh = (const int *)((const blk_q5_K *)row + j / 8)->qh;
#pragma unroll
            for (int i = 0; i < 8; i++) o->w[i] |= (int)((((unsigned)qh[i] >> s) & 0x01010101u) << 4);
        }
        o->d0 = o->d1 = cu_h2f(d) * (float)sc;
        o->dm = -cu_h2f(dmin) * (float)m;
    } else { /* CU_T_Q6_K, the device's 212-byte blocks */
        const blk_q6_K *b = (const blk_q6_K *)(row + (uint64_t)(j / 8) * CU_Q6_K_DEV_BYTES);
        const int s = j % 8, n = s / 4, g = s % 4;
        const int *ql = (const int *)(b->ql + 64 * n + 32 * (g & 1));
        const int *qh = (const int *)(b->qh + 32 * n);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int lo = (ql[i] >> (4 * (g >> 1))) & 0x0F0F0F0F;
            const int hi = (int)((((unsigned)qh[i] >> (2 * g)) & 0x03030303u) << 4);
            o->w[i] = cu_sub_bytes(lo | hi, 0x20202020);
        }
        const float d = cu_h2f(b->d);
        o->d0 = d * (float)b->scales[2 * s];
        o->d1 = d * (float)b->scales[2 * s + 1];
        o->dm = 0.0f;
    }
}

/* activation sub-block j (32 values) of token row t: its 8 ints and the raw bits of its scale,
 * which cu_act_d turns into the float — so a fetch that only loads (a pipelined GEMM's next step)
 * does not wait on the scale's load to convert it */
template <int XQ> static __device__ __forceinline__ const int *cu_act_sub_raw(const uint8_t *x, int64_t K, int64_t t, int j, uint32_t *draw) {
    if (XQ == CU_T_Q8_1) {
        const blk_q8_1 *xb = (const blk_q8_1 *)x + t * (K / 32) + j;
        *draw = xb->d;
        return (const int *)xb->qs;
    }
    const blk_q8_K *xb = (const blk_q8_K *)x + t * (K / 256) + j / 8;
    *draw = __float_as_uint(xb->d);
    return (const int *)(xb->qs + 32 * (j % 8));
}
template <int XQ> static __device__ __forceinline__ float cu_act_d(uint32_t draw) {
    return XQ == CU_T_Q8_1 ? cu_h2f((uint16_t)draw) : __uint_as_float(draw);
}
/* the same with the scale converted at once */
template <int XQ> static __device__ __forceinline__ const int *cu_act_sub(const uint8_t *x, int64_t K, int64_t t, int j, float *d8) {
    uint32_t draw;
    const int *q = cu_act_sub_raw<XQ>(x, K, t, j, &draw);
    *d8 = cu_act_d<XQ>(draw);
    return q;
}

/* the integer parts of a sub-block dot: the two 16-value halves of w . q (exact, dp4a) */
static __device__ __forceinline__ void cu_dp4a_halves(const int *w, const int *q, int *s0, int *s1) {
    int a = 0, b = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) a = __dp4a(w[i], q[i], a);
#pragma unroll
    for (int i = 4; i < 8; i++) b = __dp4a(w[i], q[i], b);
    *s0 = a, *s1 = b;
}
/* the sum of the first 16 int8 activation values of a sub-block (Q2_K's per-half min terms) */
static __device__ __forceinline__ int cu_dp4a_sum16(const int *q) {
    int s = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) s = __dp4a(0x01010101, q[i], s);
    return s;
}
/* the sum of the 32 int8 activation values of a sub-block (for the K-quants' min term) */
static __device__ __forceinline__ int cu_dp4a_sum(const int *q) {
    int s = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) s = __dp4a(0x01010101, q[i], s);
    return s;
}

#endif
