/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/gemv_unit.cuh — the 32-value unit one lane of a T = 1 GEMV dots (k_mmvq1,
 * k_mmvq_long, k_gemv_fused, k_gemv_reg: every kernel that sums a decode row), in two phases like
 * unpack.cuh's: gv_fetch loads the unit's raw words, gv_decode + gv_acc dot them with the
 * activation words gv_act_raw loads.
 * For every type but Q3_K on q8_K activations the unit is unpack.cuh's sub-block j (32 values of
 * one sub-block, element order) and gv_acc is mmvq_sub_acc. Q3_K on q8_K: unit j of super-block
 * j / 8 is the 8 positions p0 = 8 (j % 4) .. p0 + 7 of the four sub-blocks 4h .. 4h + 3 (h = (j % 8)
 * / 4) — 8 bytes of qs and 8 of hmask that no other lane needs, where the element-order sub-block
 * needs 32 bytes of each shared by 4 and 8 lanes (3 loads instead of 6). Its dot is one integer
 * sum over the four sub-blocks' scales (isum = sum_m (sc_m - 32) * dot_m, the -4 of a clear hmask
 * bit applied as -4 * sum q8), then acc += d8 * (d * isum): the CPU's q3_K x q8_K order of
 * operations within a unit (quant/q3_k.c sums a whole super-block before scaling).
 * Layer 0 (backend/cuda), device code. Host-tested under tests/codegen/emu (test_cuda_gemv_emu).
 * Non-goals: T > 1 (k_mmvq's tiles, the GEMMs keep unpack.cuh's element order).
 */
#ifndef SB_BACKEND_CUDA_DEVICE_GEMV_UNIT_CUH
#define SB_BACKEND_CUDA_DEVICE_GEMV_UNIT_CUH

#include "backend/cuda/device/unpack.cuh"

/* acc += one sub-block's dot: d8 * (d0*s0 + d1*s1 + dm*sum q), the min term only for types that
 * have one; Q2_K's two halves' mins: dm * sum q[0..15] + dm1 * sum q[16..31] (every T = 1 kernel
 * and k_mmvq's token tiles step through here: the same bits). The min terms use the exact integer
 * sum of the activation, not the q8_1 sum field: llama.cpp's CPU dots (so the reference logits) use
 * s = F16(d * sum q) for Q4_1 / Q5_1, which the CUDA quantizer does not store (s = F16(sum x),
 * formats.md §3.2) and d8 (d rounded to f16) cannot rebuild (F16(d8 * sum q) was tried: d8's own
 * rounding is of the size of s's, so it lands as far from the reference's s as the exact term). The first H200 run, with
 * q8_1 activations for these types, measured 7.5-7.7e-4 NMSE from their references (limit 1e-3;
 * docs/cuda.md) */
template <int TYPE> static __device__ __forceinline__ void mmvq_sub_acc(float *acc, const cu_wsub &ws, const int *qy, float d8) {
    int s0, s1, sq = 0;
    cu_dp4a_halves(ws.w, qy, &s0, &s1);
    if (TYPE == CU_T_Q2_K) {
        const int h0 = cu_dp4a_sum16(qy), h1 = cu_dp4a_sum16(qy + 4);
        *acc += d8 * (ws.d0 * (float)s0 + ws.d1 * (float)s1 + (ws.dm * (float)h0 + ws.dm1 * (float)h1));
        return;
    }
    if (ws.dm != 0.0f) sq = cu_dp4a_sum(qy);
    *acc += d8 * (ws.d0 * (float)s0 + ws.d1 * (float)s1 + ws.dm * (float)sq);
}

/* does the type's decode unit differ from its element-order sub-block? */
template <int TYPE, int XQ> static __host__ __device__ constexpr bool gv_q3k() { return TYPE == CU_T_Q3_K && XQ == CU_T_Q8_K; }

/* Q3_K unit j's raw words: q[0..1] qs, h[0..1] hmask (bytes p0 .. p0 + 7), q[3..6] scales[0..11] and
 * d — 8- and 16-byte loads from the device's 112-byte blocks (weight_layout.cuh) */
template <int TYPE, int XQ> static __device__ __forceinline__ void gv_fetch(const uint8_t *row, int j, cu_wraw *r) {
    if (gv_q3k<TYPE, XQ>()) {
        const blk_q3_K *b = (const blk_q3_K *)(row + (uint64_t)(j / 8) * CU_Q3_K_DEV_BYTES);
        const int h = (j % 8) / 4, p0 = 8 * (j % 4);
        const uint2 q = *(const uint2 *)(b->qs + 32 * h + p0), hm = *(const uint2 *)(b->hmask + p0);
        const int4 sd = *(const int4 *)b->scales; /* scales[0..11], d */
        r->q[0] = (int)q.x, r->q[1] = (int)q.y, r->h[0] = (int)hm.x, r->h[1] = (int)hm.y;
        r->q[3] = sd.x, r->q[4] = sd.y, r->q[5] = sd.z, r->q[6] = sd.w;
    } else {
        cu_fetch<TYPE>(row, j, r);
    }
}

/* Q3_K: w[2m + k] = the 4 values at p0 + 4k .. of sub-block 4h + m, as q2 | hbit << 2 (0..7: the
 * -4 goes to gv_acc); sc = the four scales (unsigned 6-bit, byte m); d0 = d */
template <int TYPE, int XQ> static __device__ __forceinline__ void gv_decode(const cu_wraw *r, int j, cu_wsub *o, uint32_t *sc) {
    if (gv_q3k<TYPE, XQ>()) {
        const int h = (j % 8) / 4, hf = (j % 4) >> 1;
        const uint32_t *q = (const uint32_t *)r->q, *hm = (const uint32_t *)r->h;
#pragma unroll
        for (int k = 0; k < 2; k++) {
            const uint32_t qw = q[k], hw = (hm[k] >> (4 * h)) << 2; /* bit m of each byte -> bit 2 + m */
#pragma unroll
            for (int m = 0; m < 4; m++) o->w[2 * m + k] = (int)(((qw >> (2 * m)) & 0x03030303u) | ((hw >> m) & 0x04040404u));
        }
        /* scale 8h + 2m + hf: low nibble of scales[2m + hf] >> 4h, high bits (scales[8 + (2m + hf) % 4]
         * >> 2 (2h + m / 2)) & 3 */
        const uint32_t s0 = q[3], s1 = q[4], s2 = q[5];
        const uint32_t lo = (__byte_perm(s0, s1, 0x6420u + 0x1111u * (unsigned)hf) >> (4 * h)) & 0x0F0F0F0Fu;
        const uint32_t hp = __byte_perm(s2, 0u, 0x2020u + 0x1111u * (unsigned)hf) >> (4 * h);
        *sc = lo | (((hp & 0x00000303u) | ((hp >> 2) & 0x03030000u)) << 4);
        o->d0 = cu_h2f((uint16_t)(q[6] & 0xFFFFu));
    } else {
        cu_decode<TYPE>(r, j, o);
    }
}

/* the activation words of unit j: q8_K sub-block j's 8 (element order), or Q3_K's four sub-blocks'
 * positions p0 .. p0 + 7 (qs[32 (4h + m) + p0 + 4k] -> q[2m + k]); the scale's raw bits */
template <int TYPE, int XQ> static __device__ __forceinline__ void gv_act_raw(const uint8_t *x, int64_t K, int j, int *q, uint32_t *draw) {
    if (gv_q3k<TYPE, XQ>()) {
        const blk_q8_K *xb = (const blk_q8_K *)x + j / 8;
        const int *qs = (const int *)(xb->qs + 128 * ((j % 8) / 4) + 8 * (j % 4));
        *draw = __float_as_uint(xb->d);
#pragma unroll
        for (int m = 0; m < 4; m++) q[2 * m] = qs[8 * m], q[2 * m + 1] = qs[8 * m + 1];
    } else {
        const int *qy = cu_act_sub_raw<XQ>(x, K, 0, j, draw);
#pragma unroll
        for (int i = 0; i < 8; i++) q[i] = qy[i];
    }
}

/* sub-block j whole (gv_fetch + gv_decode; unpack.cuh's own loads for the element-order types) */
template <int TYPE, int XQ> static __device__ __forceinline__ void gv_unpack(const uint8_t *row, int j, cu_wsub *o, uint32_t *sc) {
    if (gv_q3k<TYPE, XQ>()) {
        cu_wraw r;
        gv_fetch<TYPE, XQ>(row, j, &r);
        gv_decode<TYPE, XQ>(&r, j, o, sc);
    } else {
        cu_unpack<TYPE>(row, j, o);
    }
}

/* acc += unit j's dot (gv_decode's w, sc; gv_act_raw's q, d8) */
template <int TYPE, int XQ> static __device__ __forceinline__ void gv_acc(float *acc, const cu_wsub &ws, uint32_t sc, const int *q, float d8) {
    if (gv_q3k<TYPE, XQ>()) {
        int isum = 0;
#pragma unroll
        for (int m = 0; m < 4; m++) {
            const int dot = __dp4a(ws.w[2 * m + 1], q[2 * m + 1], __dp4a(ws.w[2 * m], q[2 * m], 0));
            const int sum = __dp4a(0x01010101, q[2 * m + 1], __dp4a(0x01010101, q[2 * m], 0));
            isum += ((int)((sc >> (8 * m)) & 0xFFu) - 32) * (dot - 4 * sum);
        }
        *acc += d8 * (ws.d0 * (float)isum);
    } else {
        mmvq_sub_acc<TYPE>(acc, ws, q, d8);
    }
}

#endif
