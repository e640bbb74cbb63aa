/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/codegen/emu/emu_library.h — what a whole k_*.cu file's host launchers call of the library,
 * for an emulation driver (tests/runtime/cuda_*_emu.cc) to include once after the .cu files: the
 * settings (cu_cfg: emu_cfg, which the driver fills per call), the multiprocessors (cu_sm_count:
 * emu_sms, 8 unless the driver sets it), no PDL, and sb_fail keeping the message in emu_err.
 */
#ifndef SB_CUDA_EMU_LIBRARY_H
#define SB_CUDA_EMU_LIBRARY_H

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

static cu_config emu_cfg;
static int emu_sms = 8;
static char emu_err[512];
extern "C" const cu_config *cu_cfg(void) { return &emu_cfg; }
extern "C" int cu_sm_count(void) { return emu_sms; }
extern "C" bool cu_pdl_on(void) { return false; }
extern "C" sb_status sb_fail(sb_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(emu_err, sizeof emu_err, fmt, ap);
    va_end(ap);
    return s;
}

#endif
