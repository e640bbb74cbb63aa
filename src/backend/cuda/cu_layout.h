/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/cu_layout.h — how quantized weights lie in device memory: GGUF's blocks, except
 * Q3_K (110 bytes) and Q6_K (210), whose 2-byte-aligned blocks are padded when a weight is copied
 * to the GPU: Q3_K to 112 bytes (a whole 16-byte unit: hmask 0, qs 32, scales 96, d 108 on 16-byte
 * boundaries), Q6_K to 212 (ql 0, qh 128, scales 192, d 208 on 4-byte boundaries). The kernels then
 * read a sub-block's bits with aligned loads and no funnel shifts; fields keep GGUF's offsets and
 * meaning, the pad bytes are zero. Every other type is stored as in the file. Q6_K in 224-byte
 * blocks (16-byte loads) made each GEMV of short rows faster but the 8B's decode step 7 %
 * slower than 212 (bench/NOTES.md).
 * Layer 0 (backend/cuda). Header-only plain C: host code (exec_cuda's uploads and stages), device
 * code (strides) and the host-emulated kernel tests include it.
 * Invariants: a padded tensor's bytes are whole blocks (a row is K/256 of them).
 * Non-goals: reordering fields (each kernel keeps GGUF's decode), padding the 2-byte-aligned
 * 32-value blocks (Q4_0 / Q5_0 / Q8_0 / IQ4_NL: 6-11 % more bytes).
 */
#ifndef SB_BACKEND_CUDA_CU_LAYOUT_H
#define SB_BACKEND_CUDA_CU_LAYOUT_H

#include "backend/cuda/device/weight_layout.cuh"

#include <stdint.h>
#include <string.h>

/* the GGUF block bytes of a type the device stores padded (ggml ids 11 Q3_K, 14 Q6_K), else 0 */
static inline uint32_t cu_pad_gguf_block(int type) { return type == 11 ? 110u : type == 14 ? 210u : 0u; }
/* ... and its device block bytes */
static inline uint32_t cu_pad_dev_block(int type) { return type == 11 ? CU_Q3_K_DEV_BYTES : type == 14 ? CU_Q6_K_DEV_BYTES : 0u; }

/* device bytes of a tensor of `type` that takes `bytes` in GGUF (whole blocks); any other id, -1
 * too, the same bytes */
static inline uint64_t cu_dev_bytes(int type, uint64_t bytes) {
    const uint32_t g = cu_pad_gguf_block(type);
    return g ? bytes / g * cu_pad_dev_block(type) : bytes;
}

/* n blocks of a padded type from GGUF's layout (src) to the device's (dst), or back (to_gguf) */
static inline void cu_layout_copy(uint8_t *dst, const uint8_t *src, int type, uint64_t n, int to_gguf) {
    const uint32_t g = cu_pad_gguf_block(type), d = cu_pad_dev_block(type);
    for (uint64_t b = 0; b < n; b++) {
        if (to_gguf) {
            memcpy(dst + b * g, src + b * d, g);
        } else {
            memcpy(dst + b * d, src + b * g, g);
            memset(dst + b * d + g, 0, d - g);
        }
    }
}

/* a tensor of `type` taking `bytes` in GGUF (whole blocks) into dst in the device's layout
 * (cu_dev_bytes of them): padded, or copied as it is */
static inline void cu_layout_to_dev(uint8_t *dst, const uint8_t *src, int type, uint64_t bytes) {
    const uint32_t g = cu_pad_gguf_block(type);
    if (g) cu_layout_copy(dst, src, type, bytes / g, 0);
    else memcpy(dst, src, (size_t)bytes);
}

#endif
