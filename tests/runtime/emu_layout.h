/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/emu_layout.h — included by the emulated kernel modules (cuda_*_emu.cc): exports the
 * CUDA backend's device layout of weights (backend/cuda/cu_layout.h), so the C side of a test
 * (dev_layout.h) lays out its matrices as the executor's uploads do, without the backend's headers.
 */
#ifndef SB_TESTS_RUNTIME_EMU_LAYOUT_H
#define SB_TESTS_RUNTIME_EMU_LAYOUT_H

#include "backend/cuda/cu_layout.h"

/* device bytes of a tensor of `type` that takes `bytes` in GGUF (whole blocks) */
extern "C" unsigned long long sb_emu_dev_bytes(int type, unsigned long long bytes) { return cu_dev_bytes(type, bytes); }
/* its bytes from GGUF's layout (src) into the device's (dst, sb_emu_dev_bytes long) */
extern "C" void sb_emu_to_dev_layout(uint8_t *dst, const uint8_t *src, int type, unsigned long long bytes) {
    cu_layout_to_dev(dst, src, type, bytes);
}

#endif
