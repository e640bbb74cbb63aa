/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/weight_layout.cuh — the device block sizes of the weight types the CUDA
 * backend stores padded (backend/cuda/cu_layout.h says why and how): macros only, so host C code,
 * device code and NVRTC-compiled kernels share them.
 * Layer 0 (backend/cuda).
 */
#ifndef SB_BACKEND_CUDA_DEVICE_WEIGHT_LAYOUT_CUH
#define SB_BACKEND_CUDA_DEVICE_WEIGHT_LAYOUT_CUH

#define CU_Q3_K_DEV_BYTES 112 /* GGUF 110: hmask 0, qs 32, scales 96, d 108, 2 zero bytes */
#define CU_Q6_K_DEV_BYTES 212 /* GGUF 210: ql 0, qh 128, scales 192, d 208, 2 zero bytes: 4-byte aligned */

#endif
