/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/cu_blaslt.h — cuBLASLt, loaded with dlopen (libcublasLt.so.13, .so.12, .so): one
 * half-precision GEMM with f32 accumulation and output, the large-T prefill path of F16 / BF16
 * weights and of quantized weights dequantized to F16 (k_blas.cu, cu_matmul_blas).
 * Layer 0 (backend/cuda). Plain C (no cuBLAS header or library at build time: the few types and
 * enum values it uses are declared in cu_blaslt.c, values from cuBLASLt 12/13's cublasLt.h).
 * Invariants: availability is asked once per process (the library loads, its symbols resolve and a
 * handle is created on the current device); false is never an error, the executor simply keeps
 * its own kernels. cu_blaslt_gemm is legal inside CUDA Graph stream capture: the handle exists
 * before, the caller's workspace is set explicitly, the call allocates no device memory (its
 * descriptors are host objects; the heuristic's pick is cached per shape).
 * Non-goals: several devices, batched or strided GEMMs, FP8.
 */
#ifndef SB_BACKEND_CUDA_CU_BLASLT_H
#define SB_BACKEND_CUDA_CU_BLASLT_H

#include "backend/cuda/kernels.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of device workspace every cu_blaslt_gemm is given (the executor allocates it once). */
#define CU_BLASLT_WORKSPACE ((size_t)32 << 20)

/* Is cuBLASLt usable in this process? Loaded and a handle created at the first call (thread-safe);
 * why (may be NULL) gets the reason when not. */
bool cu_blaslt_available(char *why, size_t cap);
/* Planning tests without a GPU: on 1 makes cu_blaslt_available answer true (nothing may be
 * launched then), 0 false, -1 the library again. Process-wide. */
void cu_blaslt_assume(int on);

/* D [T rows of ldd floats, columns 0..N-1] = X W^T (+ C): w [N rows of K] and x [T rows of K], both
 * of htype (SB_TYPE_F16 or SB_TYPE_BF16), row-major (a row's K values contiguous); F32 accumulate
 * (CUBLAS_COMPUTE_32F) and output. c NULL: no addend; else c has d's layout (ldd) and may be d
 * itself (beta 1). Any alignment: the heuristic is told each pointer's (up to 256 bytes; 16 and
 * more for the fast kernels).
 * workspace: CU_BLASLT_WORKSPACE bytes of device memory. SB_ERR_UNSUPPORTED when cuBLASLt is not
 * available or has no algorithm for the shape, SB_ERR_DEVICE with the cuBLAS status on failure. */
sb_status cu_blaslt_gemm(cu_stream s, float *d, int64_t ldd, const void *w, const void *x, int htype, int64_t K, int64_t N, int64_t T,
                         const float *c, void *workspace);

#ifdef __cplusplus
}
#endif
#endif
