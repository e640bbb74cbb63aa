/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/ew_rows.cuh — the device code of k_rows.cu's elementwise chains (a FUSED
 * node's steps over one row) and of the chain with a quantize tail (pass fuse_chain_quant): the
 * chain's row, then that row quantized as it is or rms-normalised [* w] first (act_quant.cuh's
 * quant_row), the norm's sum of squares in the order of the kernel the unfused RMS_NORM_QUANT would
 * take, so the bits of cu_ew_rows followed by cu_quantize_act / cu_rms_norm_quant.
 * Layer 0 (backend/cuda), device code only; a header so the host emulation runs it
 * (tests/runtime/test_cuda_ew_quant_emu). Not given to NVRTC (codegen emits its own chains).
 */
#ifndef SB_BACKEND_CUDA_DEVICE_EW_ROWS_CUH
#define SB_BACKEND_CUDA_DEVICE_EW_ROWS_CUH

#include "backend/cuda/device/act_quant.cuh"
#include "backend/cuda/kernels.h"

#define EW_THREADS 256

/* one step other than rms_norm on v, element i of its row (o: the operand's row, or NULL). Every
 * add and multiply rounds on its own (__fadd_rn / __fmul_rn are never contracted into an FMA), so a
 * chain gives the same bits whether its values pass through memory between steps or stay in
 * registers (ew_chain_flat), and the generated chains' (codegen/cg_emit.c) too. */
static __device__ __forceinline__ float ew_apply(const cu_ew_step &st, float v, const float *o, int64_t i) {
    switch (st.op) {
    case CU_EW_ADD: return __fadd_rn(v, o[i]);
    case CU_EW_MUL: return __fmul_rn(v, o[i]);
    case CU_EW_SCALE: return __fmul_rn(v, st.f);
    case CU_EW_SOFTCAP: return __fmul_rn(tanhf(__fmul_rn(v, 1.0f / st.f)), st.f);
    case CU_EW_SILU: return cu_silu(v);
    case CU_EW_GELU: return cu_gelu(v);
    default: return __int_as_float(0x7fc00000);
    }
}

/* a chain without an rms_norm step over n = rows x E values: value e (row e / E) through every step in
 * registers, for e = e0, e0 + stride, ... — any thread may take any value, so one row spreads over
 * the whole grid (a decode step's 262,144 logits are one row). The same bits as ew_chain_row. */
static __device__ __forceinline__ void ew_chain_flat(float *dst, const float *x, int64_t E, int64_t n, const cu_ew_chain &c, int64_t e0,
                                                     int64_t stride) {
    for (int64_t e = e0; e < n; e += stride) {
        const int64_t r = e / E, i = e - r * E;
        float v = x[e];
        for (int k = 0; k < c.n; k++) {
            const cu_ew_step &st = c.st[k];
            v = ew_apply(st, v, st.opd ? (st.bcast ? st.opd : st.opd + r * E) : NULL, i);
        }
        dst[e] = v;
    }
}

/* the chain's steps over one row (y: its dst row, in: its x row) by a block of NT threads, thread t
 * owning elements t, t + NT, ...; an rms_norm step sums its squares as k_ew_rows's EW_THREADS do
 * (thread t of them: elements t, t + EW_THREADS, ... in double, then the warp butterflies and the
 * warp partials in order; threads past them wait), so every NT gives k_ew_rows's bits. part:
 * EW_THREADS / 32 doubles of shared memory, free again when this returns. */
template <int NT>
static __device__ __forceinline__ void ew_chain_row(float *y, const float *in, int64_t r, int64_t E, const cu_ew_chain &c, double *part) {
    for (int k = 0; k < c.n; k++) {
        const cu_ew_step st = c.st[k];
        if (st.op == CU_EW_RMS_NORM) {
            if (NT != EW_THREADS) __syncthreads(); /* the summing threads read values other threads wrote */
            double acc = 0.0;
            if (threadIdx.x < EW_THREADS)
                for (int64_t i = threadIdx.x; i < E; i += EW_THREADS) {
                    const float v = in[i];
                    acc += (double)(v * v);
                }
            const double sum = block_sum_d<EW_THREADS / 32>(acc, part);
            __syncthreads(); /* part is reused by a later rms step */
            const float mean = (float)(sum / (double)E);
            const float sc = 1.0f / sqrtf(mean + st.f);
            for (int64_t i = threadIdx.x; i < E; i += NT) y[i] = in[i] * sc;
        } else {
            const float *o = st.opd ? (st.bcast ? st.opd : st.opd + r * E) : NULL;
            for (int64_t i = threadIdx.x; i < E; i += NT) y[i] = ew_apply(st, in[i], o, i);
        }
        in = y;
    }
}

/* The RMSNorm scale of row y as act_build<XQ, 256> (k_act_rows, cu_config.act_fast) sums it: thread
 * (warp w < 8, lane l) takes values 32k + l of quantization blocks w, w + 8, ... in that order, in
 * double, then the warp butterflies and the 8 warp partials in order; every thread returns it. */
template <int XQ>
static __device__ __forceinline__ float act_layout_rms_scale(const float *y, int64_t E, float eps, double *part) {
    constexpr int BS = XQ == CU_T_Q8_1 ? 32 : 256, PER = BS / 32, NW = 256 / 32;
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    double acc = 0.0;
    if (wp < NW)
        for (int64_t bk = wp; bk < E / BS; bk += NW)
#pragma unroll
            for (int k = 0; k < PER; k++) {
                const float v = y[bk * BS + 32 * k + lane];
                acc += (double)(v * v);
            }
    const double sum = block_sum_d<NW>(acc, part);
    const float mean = (float)(sum / (double)E);
    return 1.0f / sqrtf(mean + eps);
}

/* tail kinds: the row as it is (cu_quantize_act), rms-normalised [* w] with the 1024-thread norm
 * kernel's sum (k_rms_norm_quant, and the generated norm quantizers), or with act_build's */
enum { EWQ_PLAIN = 0, EWQ_NORM = 1, EWQ_NORM_ACT = 2 };
#define EWQ_THREADS 1024

/* one row r of cu_ew_quant_rows by a block of EWQ_THREADS: the chain into dst's row (k_ew_rows's
 * bits), a barrier, then the tail into q's row (part: EWQ_THREADS / 32 doubles of shared memory) */
template <int XQ, int TAIL>
static __device__ __forceinline__ void ew_quant_row(float *dst, const float *x, int64_t r, int64_t E, const cu_ew_chain &c, uint8_t *q,
                                                    const float *qw, float eps, double *part) {
    float *y = dst + r * E;
    ew_chain_row<EWQ_THREADS>(y, x + r * E, r, E, c, part);
    __syncthreads(); /* the tail reads values other threads wrote */
    uint8_t *qr = q + act_row_bytes(XQ, E) * (uint64_t)r;
    if (TAIL == EWQ_PLAIN) {
        quant_row<XQ, EWQ_THREADS>(qr, E, src_plain{y});
        return;
    }
    const float sc = TAIL == EWQ_NORM ? block_rms_scale<EWQ_THREADS>(y, NULL, NULL, E, eps, part) : act_layout_rms_scale<XQ>(y, E, eps, part);
    quant_row<XQ, EWQ_THREADS>(qr, E, src_norm{y, qw, sc});
}

#endif
