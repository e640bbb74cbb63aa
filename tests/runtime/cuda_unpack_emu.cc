/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/cuda_unpack_emu.cc — the CUDA backend's weight unpacking and T = 1 row dot
 * (device/unpack.cuh, device/gemv_dot.cuh) built for the host: test_cuda_unpack_emu compiles this
 * file with the host C++ compiler against tests/codegen/emu/cuda_emu.h (and -fsanitize=alignment
 * with traps, so a load the GPU would fault on kills the check) and calls the entry points below.
 * One thread's view: the functions under test are per-lane code, no warp collectives.
 */
#include "backend/cuda/device/gemv_dot.cuh"
#include "emu_layout.h"

template <int T> static void unpack_t(const uint8_t *row, int j, int how, int *w, float *d) {
    cu_wsub o;
    memset(&o, 0, sizeof o);
    if (how == 0) {
        cu_unpack<T>(row, j, &o);
    } else {
        cu_wraw r;
        cu_wraw_zero(&r);
        cu_fetch<T>(row, j, &r);
        cu_decode<T>(&r, j, &o);
    }
    memcpy(w, o.w, sizeof o.w);
    d[0] = o.d0, d[1] = o.d1, d[2] = o.dm;
    d[3] = T == CU_T_Q2_K ? o.dm1 : o.dm; /* the second half's min */
}

template <int T, int XQ> static float dot_t(const uint8_t *row, const uint8_t *x, long long K) {
    const uint8_t *rows[1] = {row};
    float acc;
    mmvq_part_rows<T, XQ, 1>(rows, 1, x, K, 0, 1, &acc); /* one lane over every sub-block */
    return acc;
}

#define SB_EMU_TYPES(X)                                                                                                     \
    X(CU_T_Q4_0) X(CU_T_Q4_1) X(CU_T_Q5_0) X(CU_T_Q5_1) X(CU_T_Q8_0) X(CU_T_IQ4_NL) X(CU_T_Q2_K) X(CU_T_Q3_K) X(CU_T_Q4_K) \
        X(CU_T_Q5_K) X(CU_T_Q6_K) X(CU_T_IQ4_XS)

/* sub-block j of the row: 8 packed int8 words and (d0, d1, dm, second half's dm); how 0: cu_unpack,
 * 1: cu_fetch + cu_decode. -1: not a dp4a type. */
extern "C" int sb_emu_unpack(int type, const uint8_t *row, int j, int how, int *w, float *d) {
    switch (type) {
#define X(t) \
    case t: unpack_t<t>(row, j, how, w, d); return 0;
        SB_EMU_TYPES(X)
#undef X
    default: return -1;
    }
}

/* the row dot mmvq_part_rows computes with q8_1 (xq8k 0) or q8_K (1) activations x */
extern "C" int sb_emu_dot(int type, int xq8k, const uint8_t *row, const uint8_t *x, long long K, float *out) {
    switch (type) {
#define X(t)                                                                            \
    case t:                                                                             \
        *out = xq8k ? (mmvq_k_type(t) ? dot_t<t, CU_T_Q8_K>(row, x, K) : 0.0f) : dot_t<t, CU_T_Q8_1>(row, x, K); \
        return 0;
        SB_EMU_TYPES(X)
#undef X
    default: return -1;
    }
}

extern "C" unsigned long long sb_emu_row_bytes(int type, long long K) { return mmvq_row_bytes(type, K); }
extern "C" int sb_emu_k_type(int type) { return mmvq_k_type(type); }
extern "C" int sb_emu_iq4_lookup(unsigned q) { return cu_iq4_lookup(q); }
