/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/cuda_mmf_emu.cc — the F32-weight GEMM's device code (backend/cuda/device/mmf_tile.cuh)
 * built for the host: test_cuda_mmf_emu compiles this file with the host C++ compiler against
 * tests/codegen/emu/cuda_emu.h (threads as fibers, shared memory, barriers; -fsanitize=alignment
 * traps a misaligned float4) and runs k_mmft's blocks over the grid k_mmf.cu's launcher gives them,
 * with the launcher's choice of float4 or scalar loads.
 */
#include "backend/cuda/device/mmf_tile.cuh"

/* dst [T,N] = W x (+ add) as k_mmf.cu's launch_mmft runs it; *v4 says which loads ran. 0, or -1 on a deadlock */
extern "C" int sb_emu_mmft(float *dst, const float *w, long long K, long long N, const float *x, long long T, const float *add, int bcast,
                           int *v4) {
    const dim3 grid{(unsigned)((N + MMFT_BN - 1) / MMFT_BN), (unsigned)((T + MMFT_BT - 1) / MMFT_BT), 1};
    *v4 = K % 4 == 0 && (uintptr_t)w % 16 == 0 && (uintptr_t)x % 16 == 0;
    if (*v4) return emu_run3(grid, 128, [&] { mmft_tile<true>(dst, w, K, N, x, T, add, bcast, blockIdx.x, blockIdx.y); });
    return emu_run3(grid, 128, [&] { mmft_tile<false>(dst, w, K, N, x, T, add, bcast, blockIdx.x, blockIdx.y); });
}
