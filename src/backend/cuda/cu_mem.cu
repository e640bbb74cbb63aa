/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/cu_mem.cu — device memory, streams and CUDA Graph capture behind C functions
 * (kernels.h), so the runtime (plain C, no CUDA headers) can drive the device.
 * Layer 0 (backend/cuda). Every CUDA error becomes SB_ERR_DEVICE with cudaGetErrorString text;
 * cudaMalloc's out-of-memory becomes SB_ERR_OOM naming the bytes asked for and the bytes free.
 * The sticky error state is cleared after a recoverable failure, so the process stays usable.
 * Capture uses cudaStreamCaptureModeThreadLocal: other threads' CUDA calls are not disturbed.
 * Non-goals: pools/sub-allocation (the planner's arena is the pool), multi-device.
 */
#include "backend/cuda/kernels.h"
#include "backend/cuda/cu_config.h"
#include "base/status.h"

#include <cuda_runtime.h>

static sb_status fail(cudaError_t e, const char *what) {
    cudaGetLastError(); /* clear a non-sticky error */
    return sb_fail(SB_ERR_DEVICE, "cuda: %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}
#define CU_CHECK(expr, what)                      \
    do {                                          \
        cudaError_t e_ = (expr);                  \
        if (e_ != cudaSuccess) return fail(e_, what); \
    } while (0)

extern "C" sb_status cu_set_device(int dev) {
    CU_CHECK(cudaSetDevice(dev), "cudaSetDevice");
    return SB_OK;
}

extern "C" sb_status cu_malloc(void **p, size_t bytes, const char *what) {
    *p = NULL;
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        *p = NULL;
        return sb_fail(SB_ERR_OOM, "cuda: %s: cudaMalloc of %zu bytes failed, %zu of %zu bytes free", what, bytes, fr, tot);
    }
    if (e != cudaSuccess) {
        *p = NULL;
        return fail(e, what);
    }
    return SB_OK;
}

extern "C" void cu_free(void *p) {
    if (p) cudaFree(p);
}

extern "C" sb_status cu_host_alloc(void **p, size_t bytes, const char *what) {
    *p = NULL;
    cudaError_t e = cudaMallocHost(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *p = NULL;
        if (e == cudaErrorMemoryAllocation) return sb_fail(SB_ERR_OOM, "cuda: %s: cudaMallocHost of %zu bytes failed", what, bytes);
        return fail(e, what);
    }
    return SB_OK;
}

extern "C" void cu_host_free(void *p) {
    if (p) cudaFreeHost(p);
}

extern "C" sb_status cu_memcpy_h2d(void *dst, const void *src, size_t bytes, cu_stream s) {
    CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)s), "cudaMemcpyAsync host->device");
    return SB_OK;
}

extern "C" sb_status cu_memcpy_d2d(void *dst, const void *src, size_t bytes, cu_stream s) {
    CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)s), "cudaMemcpyAsync device->device");
    return SB_OK;
}

extern "C" sb_status cu_memcpy_d2h(void *dst, const void *src, size_t bytes, cu_stream s) {
    CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)s), "cudaMemcpyAsync device->host");
    CU_CHECK(cudaStreamSynchronize((cudaStream_t)s), "cudaStreamSynchronize");
    return SB_OK;
}

extern "C" sb_status cu_memcpy_d2h_async(void *dst, const void *src, size_t bytes, cu_stream s) {
    CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)s), "cudaMemcpyAsync device->host");
    return SB_OK;
}

extern "C" bool cu_is_pinned(const void *p) {
    cudaPointerAttributes a;
    if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError(); /* pageable memory is no error to remember */
        return false;
    }
    return a.type == cudaMemoryTypeHost && a.devicePointer == p;
}

extern "C" sb_status cu_memset(void *dst, int v, size_t bytes, cu_stream s) {
    CU_CHECK(cudaMemsetAsync(dst, v, bytes, (cudaStream_t)s), "cudaMemsetAsync");
    return SB_OK;
}

extern "C" sb_status cu_stream_create(cu_stream *s) {
    cudaStream_t st;
    CU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
    *s = (cu_stream)st;
    return SB_OK;
}

extern "C" void cu_stream_destroy(cu_stream s) {
    if (s) cudaStreamDestroy((cudaStream_t)s);
}

extern "C" sb_status cu_stream_sync(cu_stream s) {
    CU_CHECK(cudaStreamSynchronize((cudaStream_t)s), "cudaStreamSynchronize");
    return SB_OK;
}

extern "C" sb_status cu_graph_begin(cu_stream s) {
    CU_CHECK(cudaStreamBeginCapture((cudaStream_t)s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    return SB_OK;
}

extern "C" sb_status cu_graph_end(cu_stream s, cu_graph *out) {
    *out = NULL;
    cudaGraph_t g = NULL;
    CU_CHECK(cudaStreamEndCapture((cudaStream_t)s, &g), "cudaStreamEndCapture");
    cudaGraphExec_t ge = NULL;
    cudaError_t e = cudaGraphInstantiate(&ge, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) return fail(e, "cudaGraphInstantiate");
    *out = (cu_graph)ge;
    return SB_OK;
}

extern "C" sb_status cu_graph_launch(cu_graph g, cu_stream s) {
    CU_CHECK(cudaGraphLaunch((cudaGraphExec_t)g, (cudaStream_t)s), "cudaGraphLaunch");
    return SB_OK;
}

extern "C" void cu_graph_destroy(cu_graph g) {
    if (g) cudaGraphExecDestroy((cudaGraphExec_t)g);
}

extern "C" sb_status cu_mem_info(size_t *free_b, size_t *total_b) {
    CU_CHECK(cudaMemGetInfo(free_b, total_b), "cudaMemGetInfo");
    return SB_OK;
}

static int assumed_cc = 0, assumed_sms = 0; /* cu_assume_device */
extern "C" void cu_assume_device(int cc_major, int sms) {
    assumed_cc = cc_major > 0 ? cc_major : 0, assumed_sms = sms > 0 ? sms : 0;
    cu_mma_forget_device();
}

extern "C" int cu_sm_count(void) {
    if (assumed_sms) return assumed_sms;
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
        cudaGetLastError();
        return 1;
    }
    return n;
}

extern "C" int cu_cc_major(void) {
    if (assumed_cc) return assumed_cc;
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

/* PDL needs a compute capability >= 9.0 device and kernels compiled for compute_90+ (they carry
 * griddepcontrol); asked once (a race stores the same answer) */
extern "C" bool cu_pdl_on(void) {
    static int ok = -1;
    int v = __atomic_load_n(&ok, __ATOMIC_RELAXED);
    if (v < 0) {
        v = cu_cc_major() >= 9 && cu_kernels_ptx_version() >= 90;
        __atomic_store_n(&ok, v, __ATOMIC_RELAXED);
    }
    return v && cu_cfg()->pdl;
}

extern "C" sb_status cu_events_create(void **ev, int n) {
    for (int i = 0; i < n; i++) ev[i] = NULL;
    for (int i = 0; i < n; i++) {
        cudaEvent_t e;
        cudaError_t r = cudaEventCreate(&e);
        if (r != cudaSuccess) {
            cu_events_destroy(ev, i);
            return fail(r, "cudaEventCreate");
        }
        ev[i] = (void *)e;
    }
    return SB_OK;
}

extern "C" void cu_events_destroy(void **ev, int n) {
    for (int i = 0; i < n; i++)
        if (ev[i]) cudaEventDestroy((cudaEvent_t)ev[i]), ev[i] = NULL;
}

extern "C" sb_status cu_event_record(void *ev, cu_stream s) {
    CU_CHECK(cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)s), "cudaEventRecord");
    return SB_OK;
}

extern "C" sb_status cu_event_ms(void *a, void *b, float *ms) {
    CU_CHECK(cudaEventSynchronize((cudaEvent_t)b), "cudaEventSynchronize"); /* b recorded, maybe not reached yet */
    CU_CHECK(cudaEventElapsedTime(ms, (cudaEvent_t)a, (cudaEvent_t)b), "cudaEventElapsedTime");
    return SB_OK;
}
