/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * api/api_backend.c — sb_backend_get_info: which backends this build has and what this machine
 * offers. Layer 3 (api). Without SB_HAVE_CUDA the CUDA fields say "not compiled".
 */
#include "sonicboom.h"
#include "base/status.h"
#include "backend/cpu/cpu_kernels.h"
#ifdef SB_HAVE_CUDA
#include "backend/cuda/cu_device.h"
#endif

#include <stdio.h>
#include <string.h>

SB_API sb_status sb_backend_get_info(sb_backend_info *out) {
    if (!out) return sb_fail(SB_ERR_INVALID_ARG, "sb_backend_get_info: NULL out");
    memset(out, 0, sizeof *out);
    snprintf(out->cpu_isa, sizeof out->cpu_isa, "%s", cpu_isa_name(cpu_isa_active()));
#ifdef SB_HAVE_CUDA
    out->cuda_compiled = 1;
    int n = 0;
    if (cu_device_count(&n) != SB_OK) {
        snprintf(out->cuda_error, sizeof out->cuda_error, "%s", sb_last_error());
        sb_error_clear();
        return SB_OK;
    }
    out->cuda_devices = n;
    int ma = 0, mi = 0;
    if (n > 0 && cu_device_name(0, out->cuda_device_name, sizeof out->cuda_device_name, &ma, &mi) == SB_OK)
        out->cuda_cc = ma * 10 + mi;
    else if (n == 0)
        snprintf(out->cuda_error, sizeof out->cuda_error, "no CUDA device");
#else
    snprintf(out->cuda_error, sizeof out->cuda_error, "built without the CUDA backend");
#endif
    return SB_OK;
}
