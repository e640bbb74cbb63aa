/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/cuda_tensor_ops_emu.cc — the device code of the tensor ABI's CUDA kernels
 * (backend/cuda/device/tensor_ops.cuh: k_layer_norm, k_gelu_erf, k_concat, k_permute) built for
 * the host: test_cuda_tensor_ops_emu compiles this file with the host C++ compiler against
 * tests/codegen/emu/cuda_emu.h and runs each as its launcher in k_rows.cu does, the copies' grid
 * capped at max_x x max_y blocks (the launchers: COPY_MAX_X x COPY_MAX_Y) so small caps walk the
 * strides.
 */
#include "backend/cuda/device/tensor_ops.cuh"

extern "C" int sb_emu_layer_norm(float *dst, const float *x, long long E, long long rows, float eps) {
    return emu_run((unsigned)rows, LN_THREADS, [&] {
        __shared__ double part[LN_THREADS / 32];
        layer_norm_row(dst + (int64_t)blockIdx.x * E, x + (int64_t)blockIdx.x * E, E, eps, part);
    });
}

extern "C" int sb_emu_gelu(float *dst, const float *x, long long n, unsigned max_x) {
    return emu_run3(tensor_copy_grid(n, 1, max_x, 1), COPY_THREADS, [&] { gelu_elems(dst, x, n); });
}

extern "C" int sb_emu_concat(float *dst, const float *const *src, const long long *chunk, int n, long long outer, unsigned max_x, unsigned max_y) {
    concat_args a = {};
    a.n = n, a.outer = outer;
    for (int i = 0; i < n; i++) a.src[i] = src[i], a.chunk[i] = chunk[i], a.total += chunk[i];
    return emu_run3(tensor_copy_grid(a.total, outer, max_x, max_y), COPY_THREADS, [&] { concat_elems(dst, a); });
}

extern "C" int sb_emu_permute(float *dst, const float *x, const long long *ne, const int *perm, unsigned max_x, unsigned max_y) {
    const int64_t ne4[4] = {ne[0], ne[1], ne[2], ne[3]};
    const int32_t p4[4] = {perm[0], perm[1], perm[2], perm[3]};
    const permute_args a = permute_args_of(ne4, p4);
    return emu_run3(tensor_copy_grid(a.on[0], a.on[1] * a.on[2] * a.on[3], max_x, max_y), COPY_THREADS, [&] { permute_elems(dst, x, a); });
}
