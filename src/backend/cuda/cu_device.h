/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/cu_device.h — CUDA device discovery for the runtime. Layer 0 (backend/cuda).
 * The CUDA runtime is linked statically; it loads the driver (libcuda.so) itself with dlopen, so on
 * a machine without a GPU or driver these calls return SB_ERR_DEVICE with the CUDA error text and
 * the library keeps running on the CPU. Never aborts.
 * Non-goals (yet): kernels, streams, graphs — the CUDA issue builds them on this.
 */
#ifndef SB_BACKEND_CUDA_DEVICE_H
#define SB_BACKEND_CUDA_DEVICE_H

#include "sonicboom.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices. SB_ERR_DEVICE (with cudaGetErrorString text) when the driver is
 * missing or no device can be used; *n is then 0. */
sb_status cu_device_count(int *n);

/* Name and compute capability of device i. */
sb_status cu_device_name(int i, char *name, size_t cap, int *cc_major, int *cc_minor);

#ifdef __cplusplus
}
#endif
#endif
