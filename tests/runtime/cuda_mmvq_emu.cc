/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/cuda_mmvq_emu.cc — k_mmvq.cu's dp4a GEMV launcher (cu_matmul_q8) built for the
 * host: test_cuda_mmvq_emu compiles this file with the host C++ compiler against
 * tests/codegen/emu/cuda_emu.h and runs its T = 1 launches (k_mmvq1 at R rows a warp, k_mmvq_long)
 * as the launcher sizes them, with the epilogue's non-finite flag.
 */
#include "backend/cuda/k_mmvq.cu"
#include "emu_layout.h"
#include "emu_library.h" /* cu_cfg (emu_cfg), cu_sm_count, cu_pdl_on, sb_fail (emu_err) */

/* cu_matmul_q8 of w [N rows of wtype over K] times xq (T tokens of xtype) into dst, with the
 * epilogue {add (a bias, NULL: none), flag}; head_rows: cu_config.head_rows (rows a warp past 65,536
 * rows). Returns the launcher's status (its text on stderr). */
extern "C" int sb_emu_mmvq(float *dst, const void *w, int wtype, long long K, long long N, const void *xq, int xtype, long long T,
                           const float *add, unsigned *flag, int head_rows) {
    emu_cfg.head_rows = head_rows;
    emu_cfg.mmq = 3;
    cu_epilogue ep = {};
    ep.add = add, ep.bcast = 1, ep.nonfinite = flag;
    const sb_status st = cu_matmul_q8(nullptr, dst, w, wtype, K, N, xq, xtype, T, &ep);
    if (st != SB_OK) fprintf(stderr, "cu_matmul_q8: %s\n", emu_err);
    return (int)st;
}
