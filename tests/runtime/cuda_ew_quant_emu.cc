/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/cuda_ew_quant_emu.cc — the elementwise chain kernels' device code
 * (backend/cuda/device/ew_rows.cuh) and the quantizers they are compared with
 * (device/act_quant.cuh) built for the host: test_cuda_ew_quant_emu compiles this file with the
 * host C++ compiler against tests/codegen/emu/cuda_emu.h and runs each as its launcher does — the
 * chain with its quantize tail (k_ew_quant_rows: 1024 threads a row), the chain alone (k_ew_rows:
 * 256; k_ew_flat, a grid over all values, for chains without a norm), the plain quantizer (k_quant_rows: 1024), the norm quantizer (k_rms_norm_quant: 1024, or
 * k_act_rows with act_fast: 256, act_build).
 */
#include "backend/cuda/device/ew_rows.cuh"

/* chain kind k over x [E, rows] with operands a (full) and w (one row) */
static cu_ew_chain chain_of(int k, const float *a, const float *w) {
    cu_ew_chain c = {0};
    if (k == 0) { /* gemma: x = rms_norm(mm) * w + residual */
        c.n = 3;
        c.st[0] = cu_ew_step{.op = CU_EW_RMS_NORM, .f = 1e-6f};
        c.st[1] = cu_ew_step{.op = CU_EW_MUL, .bcast = 1, .opd = w};
        c.st[2] = cu_ew_step{.op = CU_EW_ADD, .opd = a};
    } else if (k == 1) { /* the norm in the middle, a broadcast add last */
        c.n = 4;
        c.st[0] = cu_ew_step{.op = CU_EW_ADD, .opd = a};
        c.st[1] = cu_ew_step{.op = CU_EW_RMS_NORM, .f = 1e-5f};
        c.st[2] = cu_ew_step{.op = CU_EW_SCALE, .f = 0.70710677f};
        c.st[3] = cu_ew_step{.op = CU_EW_ADD, .bcast = 1, .opd = w};
    } else { /* no norm */
        c.n = 3;
        c.st[0] = cu_ew_step{.op = CU_EW_SCALE, .f = 3.0f};
        c.st[1] = cu_ew_step{.op = CU_EW_SOFTCAP, .f = 5.0f};
        c.st[2] = cu_ew_step{.op = CU_EW_ADD, .opd = a};
    }
    return c;
}

/* tail 0 plain, 1 norm (1024-thread sum), 2 norm (act_build's sum); xq8k: Q8_K, else Q8_1 */
extern "C" int sb_emu_ew_quant(float *dst, const float *x, long long E, long long rows, int kind, const float *a, const float *w, int xq8k,
                               uint8_t *q, int tail, const float *qw, float eps) {
    const cu_ew_chain chain = chain_of(kind, a, w), *c = &chain;
    return emu_run((unsigned)rows, EWQ_THREADS, [&] {
        __shared__ double part[EWQ_THREADS / 32];
        if (xq8k) {
            if (tail == 0) ew_quant_row<CU_T_Q8_K, EWQ_PLAIN>(dst, x, blockIdx.x, E, *c, q, qw, eps, part);
            else if (tail == 1) ew_quant_row<CU_T_Q8_K, EWQ_NORM>(dst, x, blockIdx.x, E, *c, q, qw, eps, part);
            else ew_quant_row<CU_T_Q8_K, EWQ_NORM_ACT>(dst, x, blockIdx.x, E, *c, q, qw, eps, part);
        } else {
            if (tail == 0) ew_quant_row<CU_T_Q8_1, EWQ_PLAIN>(dst, x, blockIdx.x, E, *c, q, qw, eps, part);
            else if (tail == 1) ew_quant_row<CU_T_Q8_1, EWQ_NORM>(dst, x, blockIdx.x, E, *c, q, qw, eps, part);
            else ew_quant_row<CU_T_Q8_1, EWQ_NORM_ACT>(dst, x, blockIdx.x, E, *c, q, qw, eps, part);
        }
    });
}

extern "C" int sb_emu_ew_rows(float *dst, const float *x, long long E, long long rows, int kind, const float *a, const float *w) {
    const cu_ew_chain chain = chain_of(kind, a, w), *c = &chain;
    return emu_run((unsigned)rows, EW_THREADS, [&] {
        __shared__ double part[EW_THREADS / 32];
        ew_chain_row<EW_THREADS>(dst + blockIdx.x * E, x + blockIdx.x * E, blockIdx.x, E, *c, part);
    });
}

/* k_ew_flat's grid of `blocks` blocks over rows x E values (cu_ew_rows for chains without a norm) */
extern "C" int sb_emu_ew_flat(float *dst, const float *x, long long E, long long rows, int kind, const float *a, const float *w, int blocks) {
    const cu_ew_chain chain = chain_of(kind, a, w), *c = &chain;
    return emu_run((unsigned)blocks, EW_THREADS, [&] {
        ew_chain_flat(dst, x, E, E * rows, *c, (int64_t)blockIdx.x * EW_THREADS + threadIdx.x, (int64_t)gridDim.x * EW_THREADS);
    });
}

template <int XQ> static int quant(uint8_t *q, const float *y, long long E, long long rows, int tail, const float *w, float eps) {
    if (tail == 2) /* k_act_rows<XQ, AQ_NORM, AQ_MAXV> */
        return emu_run((unsigned)rows, 256, [&] {
            __shared__ double part[256 / 32];
            const int64_t r = blockIdx.x;
            act_build<XQ, 256, AQ_NORM, AQ_MAXV>(q + act_row_bytes(XQ, E) * (uint64_t)r, E, y + r * E, w, eps, NULL, NULL, NULL, NULL, 0, part);
        });
    return emu_run((unsigned)rows, 1024, [&] {
        __shared__ double part[1024 / 32];
        const int64_t r = blockIdx.x;
        uint8_t *d = q + act_row_bytes(XQ, E) * (uint64_t)r;
        if (tail == 0) { /* k_quant_rows<XQ, AQ_PLAIN> */
            quant_row<XQ, 1024>(d, E, src_plain{y + r * E});
            return;
        }
        const float sc = block_rms_scale<1024>(y + r * E, NULL, NULL, E, eps, part); /* k_rms_norm_quant<XQ> */
        quant_row<XQ, 1024>(d, E, src_norm{y + r * E, w, sc});
    });
}

extern "C" int sb_emu_quant(uint8_t *q, const float *y, long long E, long long rows, int xq8k, int tail, const float *w, float eps) {
    return xq8k ? quant<CU_T_Q8_K>(q, y, E, rows, tail, w, eps) : quant<CU_T_Q8_1>(q, y, E, rows, tail, w, eps);
}
