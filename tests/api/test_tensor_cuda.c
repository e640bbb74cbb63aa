/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/api/test_tensor_cuda.c — tensors and programs on a real GPU (SB_DEVICE_CUDA) against the
 * same work on the CPU: the scenarios of device_lib.h (a traced llama block's prefill and decode
 * programs sharing their caches, eager ops, a cache handed between CPU and GPU writers, outputs
 * written in place and read by GPU programs, two views of one weight, the mixed-device refusal).
 * Without a usable GPU it checks the clean refusal (SB_ERR_DEVICE naming the reason, or
 * SB_ERR_UNSUPPORTED in a build without CUDA), that SB_DEVICE_AUTO falls back to the CPU, and
 * skips the rest, saying so. test_tensor_device.c runs the same scenarios on a stand-in device.
 */
#include "test.h"

#include "sonicboom.h"
#include "api/tensor_lib.h"
#include "api/device_lib.h"

/* no GPU: refused with the reason; auto is the CPU */
static void check_refusal(const sb_backend_info *bi) {
    const int64_t ne[1] = {4};
    sb_tensor *t = (sb_tensor *)1;
    const sb_status want = bi->cuda_compiled ? SB_ERR_DEVICE : SB_ERR_UNSUPPORTED;
    CHECK_EQ_INT(sb_tensor_create(SB_DEVICE_CUDA, SB_TYPE_F32, 1, ne, NULL, 0, &t), want);
    CHECKF(!t && strstr(sb_last_error(), "sb_tensor_create: SB_DEVICE_CUDA: "), "%s", sb_last_error());
    CHECK(sb_tensor_create(SB_DEVICE_AUTO, SB_TYPE_F32, 1, ne, NULL, 0, &t) == SB_OK && dl_device_of(t) == SB_DEVICE_CPU);
    sb_graph *g = NULL;
    sb_value x, y;
    CHECK(sb_graph_create(&g) == SB_OK && sb_graph_input(g, SB_INPUT_DATA, "x", SB_TYPE_F32, 1, ne, &x) == SB_OK);
    CHECK(sb_graph_op(g, "silu", &x, 1, NULL, 0, &y) == SB_OK && sb_graph_output(g, y, "y") == SB_OK);
    sb_program *pr = (sb_program *)1;
    sb_compile_params cp = {.device = SB_DEVICE_CUDA};
    CHECK_EQ_INT(sb_graph_compile(g, &cp, &pr), want);
    CHECKF(!pr && strstr(sb_last_error(), "sb_graph_compile: SB_DEVICE_CUDA: "), "%s", sb_last_error());
    cp.device = SB_DEVICE_AUTO;
    sb_tensor *out[1] = {NULL};
    CHECK(sb_graph_compile(g, &cp, &pr) == SB_OK && pr && sb_program_run(pr, &t, 1, out, 1) == SB_OK && dl_device_of(out[0]) == SB_DEVICE_CPU);
    sb_program_free(pr);
    sb_graph_free(g);
    sb_tensor_free(out[0]), sb_tensor_free(t);
}

int main(void) {
    sb_backend_info bi;
    CHECK(sb_backend_get_info(&bi) == SB_OK);
    if (bi.cuda_devices < 1) {
        printf("no GPU here (%s): the refusal checked, the GPU cases skipped\n", bi.cuda_error);
        check_refusal(&bi);
        return test_summary();
    }
    printf("GPU: %s (cc %d)\n", bi.cuda_device_name, bi.cuda_cc);
    dl_check_all(SB_DEVICE_CUDA, 1e-4, 1e-3);
    return test_summary();
}
