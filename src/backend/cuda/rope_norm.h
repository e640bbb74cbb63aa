/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/rope_norm.h — cu_rope_norm (k_rope.cu): the RoPE of RMS-normalised heads, the
 * executor's kernel for a ROPE or ROPE_STORE with a head norm (pass fuse_norm_rope, Qwen3 / Gemma
 * 3 / Gemma 4 q and k norms). Its own header beside kernels.h so that the norm touches no other
 * kernel file.
 * Layer 0 (backend/cuda). Device code: device/rope_norm.cuh (math, layout and bits there).
 */
#ifndef SB_BACKEND_CUDA_ROPE_NORM_H
#define SB_BACKEND_CUDA_ROPE_NORM_H

#include "backend/cuda/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cu_rope of each head of x first RMS-normalised over its D dims (eps) and multiplied by w [D]
 * (NULL: no weight): dst [D,H,T], or with a->cache the cache column (a->rows or pos), as cu_rope.
 * dst must not overlap x. SB_OK, or SB_ERR_DEVICE. */
sb_status cu_rope_norm(cu_stream s, float *dst, const float *x, const int32_t *pos, const cu_rope_args *a, float eps, const float *w);

#ifdef __cplusplus
}
#endif

#endif
