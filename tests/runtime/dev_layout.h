/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/dev_layout.h — a test's quantized matrix in the layout the CUDA backend keeps
 * weights in on the device (backend/cuda/cu_layout.h: Q3_K / Q6_K blocks padded to 16-byte units),
 * for the host-emulated kernels, which read that layout; through the emulated module's exports
 * (emu_layout.h), as tests of a build without CUDA do not see the backend's headers.
 */
#ifndef SB_TESTS_RUNTIME_DEV_LAYOUT_H
#define SB_TESTS_RUNTIME_DEV_LAYOUT_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

static unsigned long long (*emu_dev_bytes)(int, unsigned long long);
static void (*emu_to_dev_layout)(uint8_t *, const uint8_t *, int, unsigned long long);

/* the exports of emulated module h; false when it lacks them */
static inline int test_dev_layout_load(void *h) {
    *(void **)&emu_dev_bytes = dlsym(h, "sb_emu_dev_bytes");
    *(void **)&emu_to_dev_layout = dlsym(h, "sb_emu_to_dev_layout");
    return emu_dev_bytes && emu_to_dev_layout;
}

/* w (bytes of a matrix of `type`, GGUF layout, whole blocks) replaced by a fresh 256-byte aligned
 * copy in the device's layout, 256 readable bytes past its end as the executor's buffers have;
 * returns it (w freed) */
static inline uint8_t *test_to_dev_layout(int type, uint8_t *w, uint64_t bytes) {
    const uint64_t db = emu_dev_bytes(type, bytes);
    if (db == bytes) return w;
    uint8_t *d = (uint8_t *)aligned_alloc(256, (size_t)((db + 255) & ~(uint64_t)255) + 256);
    if (!d) abort();
    emu_to_dev_layout(d, w, type, bytes);
    free(w);
    return d;
}

#endif
