/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/api/test_backend.c — the library answers sb_backend_get_info on any machine: with the CUDA
 * backend compiled in but no GPU/driver (CI), it reports why and carries on with CPU work.
 */
#include "sonicboom.h"
#include "test.h"

int main(void) {
    sb_backend_info bi;
    CHECK(sb_backend_get_info(NULL) == SB_ERR_INVALID_ARG);
    CHECK(sb_backend_get_info(&bi) == SB_OK);
    printf("cpu isa %s; cuda compiled %d, devices %d, %s%s\n", bi.cpu_isa, bi.cuda_compiled, bi.cuda_devices,
           bi.cuda_device_name, bi.cuda_error);
    CHECK(bi.cpu_isa[0] != 0);
    CHECK(bi.cuda_devices > 0 || bi.cuda_error[0] != 0);
#ifdef SB_HAVE_CUDA
    CHECK(bi.cuda_compiled == 1);
#endif
    /* CPU work still runs after the CUDA probe */
    CHECK(sb_backend_get_info(&bi) == SB_OK);
    int64_t be, bb;
    CHECK(sb_type_size(SB_TYPE_Q4_K, &be, &bb) == SB_OK && be == 256 && bb == 144);
    return test_summary();
}
