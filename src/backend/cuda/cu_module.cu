/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/cu_module.cu — run-time loaded kernels (codegen/'s NVRTC cubins or PTX): load an
 * image with cudaLibraryLoadData (context-independent, no driver API linked), get a kernel by
 * name, launch it with programmatic stream serialization exactly like cu_launch (cu_launch.cuh) —
 * generated kernels start with CU_PDL_ENTRY like every hand-written one, since every launch of a
 * stream (and captured graph) uses PDL on sm_90+.
 * Layer 0 (backend/cuda): bytes, names and device pointers in; no knowledge of graphs or codegen.
 * Loaded images are kept for the process lifetime, keyed by (image pointer, name): codegen hands
 * out binaries that live as long, so a kernel used by many plans is loaded once.
 * Errors: SB_ERR_DEVICE with the CUDA error text; nothing aborts, nothing synchronizes.
 */
#include "backend/cuda/cu_launch.cuh"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct loaded {
    const void *image;
    char name[64];
    cudaLibrary_t lib;
    cudaKernel_t k;
} loaded;

static pthread_mutex_t mod_mu = PTHREAD_MUTEX_INITIALIZER;
static loaded *mods;
static int n_mods, cap_mods;

extern "C" sb_status cu_gen_load(const void *image, const char *name, void **fn) {
    *fn = NULL;
    if (!image || !name || strlen(name) >= sizeof mods[0].name) return sb_fail(SB_ERR_INVALID_ARG, "cuda: generated kernel image/name");
    pthread_mutex_lock(&mod_mu);
    for (int i = 0; i < n_mods; i++)
        if (mods[i].image == image && !strcmp(mods[i].name, name)) {
            *fn = (void *)mods[i].k;
            pthread_mutex_unlock(&mod_mu);
            return SB_OK;
        }
    if (n_mods == cap_mods) {
        int nc = cap_mods ? 2 * cap_mods : 64;
        loaded *nm = (loaded *)realloc(mods, (size_t)nc * sizeof *nm);
        if (!nm) {
            pthread_mutex_unlock(&mod_mu);
            return sb_fail(SB_ERR_OOM, "cuda: generated kernel table");
        }
        mods = nm;
        cap_mods = nc;
    }
    cudaLibrary_t lib = NULL;
    cudaError_t e = cudaLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0);
    cudaKernel_t k = NULL;
    if (e == cudaSuccess) {
        e = cudaLibraryGetKernel(&k, lib, name);
        /* load it into this context now (lazy loading would do it at the first launch, which may
         * be inside a CUDA-Graph capture) */
        cudaFuncAttributes fa;
        if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, (const void *)k);
        if (e != cudaSuccess) cudaLibraryUnload(lib);
    }
    if (e != cudaSuccess) {
        pthread_mutex_unlock(&mod_mu);
        (void)cudaGetLastError();
        return sb_fail(SB_ERR_DEVICE, "cuda: loading generated kernel %s: %s (%s)", name, cudaGetErrorString(e), cudaGetErrorName(e));
    }
    loaded *m = &mods[n_mods++];
    m->image = image;
    snprintf(m->name, sizeof m->name, "%s", name);
    m->lib = lib;
    m->k = k;
    *fn = (void *)k;
    pthread_mutex_unlock(&mod_mu);
    return SB_OK;
}

extern "C" sb_status cu_gen_launch(cu_stream s, void *fn, unsigned grid, unsigned block, void *params) {
    if (!fn || grid == 0 || block == 0 || block > 1024) return sb_fail(SB_ERR_INVALID_ARG, "cuda: generated kernel launch %u x %u", grid, block);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(block);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = (cudaStream_t)s;
    cudaLaunchAttribute at[2];
    cfg.attrs = at;
    cfg.numAttrs = cu_launch_attrs(at);
    void *args[1] = {params};
    (void)cudaLaunchKernelExC(&cfg, (const void *)fn, args);
    return cu_after_launch("a generated kernel (codegen)");
}
