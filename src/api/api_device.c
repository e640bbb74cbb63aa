/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * api/api_device.c — the one CUDA backend the tensor API shares (programs compiled for CUDA and
 * eager ops on CUDA tensors), and the coherence of tensor buffers' host memory with that backend's
 * device copies.
 * Layer 3 (api). The backend is opened on first CUDA use and lives until the process ends; one
 * sharing backend means one device copy of each weight and cache, whichever programs bind it (a
 * traced model's prefill and decode programs share their caches). A process-wide recursive mutex
 * is held around every call into it (its executor serves one call at a time).
 * Coherence, per buffer (api_buf.on_dev, dev_newer): the backend keeps device copies of the weights
 * and caches bound into its runs, keyed by host address. A device run that writes a cache makes its
 * copy newer (dev_newer): any host read downloads it first. A host write (a CPU run, an eager CPU
 * kv_store, an output written in place) is sent on to the device copy at once (refresh). Freeing the
 * memory drops the device copy, so a later buffer at the same address never finds stale data.
 * Page-locked host memory (api_dev_host_alloc) comes from the backend too: programs' outputs made
 * there (sb_compile_params.page_locked_outputs) are written by the GPU directly.
 * Non-goals: several GPUs, device-resident eager results (outputs come back to the host each run).
 */
#include "api/api_tensor.h"
#include "backend/backend.h"
#include "base/status.h"
#include "runtime/backends.h"

#include <pthread.h>
#include <stdio.h>

/* tokens a run may hold: the CUDA executor's most (grid.y of several launches) */
#define DEV_MAX_TOKENS 65535

static pthread_once_t lock_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t dev_lock;
static backend *dev_be; /* NULL until first CUDA use; then until the process ends */

static void lock_init(void) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&dev_lock, &a);
    pthread_mutexattr_destroy(&a);
}

void api_dev_lock(void) {
    pthread_once(&lock_once, lock_init);
    pthread_mutex_lock(&dev_lock);
}

void api_dev_unlock(void) { pthread_mutex_unlock(&dev_lock); }

backend *api_dev_backend(void) { return dev_be; }

void api_dev_install(backend *be) {
    api_dev_lock();
    dev_be = be;
    api_dev_unlock();
}

/* the shared backend, opened if need be (the lock held) */
static sb_status dev_open(const char *fn) {
    if (dev_be) return SB_OK;
    const backend_kind *k = backend_kind_find("cuda");
    if (!k) return sb_fail(SB_ERR_UNSUPPORTED, "%s: SB_DEVICE_CUDA: this build has no CUDA backend", fn);
    char why[256] = "";
    if (!k->available(why, sizeof why)) return sb_fail(SB_ERR_DEVICE, "%s: SB_DEVICE_CUDA: %s", fn, why);
    const backend_params bp = {.n_threads = 1, .max_tokens = DEV_MAX_TOKENS};
    const sb_status st = k->create(&bp, &dev_be);
    if (st != SB_OK) {
        dev_be = NULL;
        return sb_fail_context(st, "%s: SB_DEVICE_CUDA", fn);
    }
    return SB_OK;
}

sb_status api_dev_resolve(const char *fn, int device, int *out) {
    *out = SB_DEVICE_CPU;
    if (device == SB_DEVICE_CPU) return SB_OK;
    if (device != SB_DEVICE_CUDA && device != SB_DEVICE_AUTO)
        return sb_fail(SB_ERR_INVALID_ARG, "%s: device %d (SB_DEVICE_CPU, SB_DEVICE_CUDA or SB_DEVICE_AUTO)", fn, device);
    api_dev_lock();
    sb_status st = dev_open(fn);
    api_dev_unlock();
    if (st == SB_OK) *out = SB_DEVICE_CUDA;
    else if (device == SB_DEVICE_AUTO) {
        sb_log(SB_LOG_INFO, "%s: device auto: the CPU (%s)", fn, sb_last_error());
        sb_error_clear();
        st = SB_OK;
    }
    return st;
}

// ---- coherence ----

sb_status api_buf_host_read(api_buf *b) {
    if (!atomic_load(&b->dev_newer)) return SB_OK;
    sb_status st = SB_OK;
    api_dev_lock();
    if (atomic_load(&b->dev_newer) && dev_be) {
        st = dev_be->ops->download ? dev_be->ops->download(dev_be, b->data, b->bytes) : SB_OK;
        if (st == SB_OK) atomic_store(&b->dev_newer, false);
    }
    api_dev_unlock();
    return st;
}

sb_status api_buf_host_wrote(api_buf *b) {
    if (!atomic_load(&b->on_dev)) return SB_OK;
    sb_status st = SB_OK;
    api_dev_lock();
    if (dev_be && dev_be->ops->refresh) st = dev_be->ops->refresh(dev_be, b->data, b->bytes);
    if (st == SB_OK) atomic_store(&b->dev_newer, false);
    api_dev_unlock();
    return st;
}

/* a load before each store: a program's run calls this for every buffer it binds (hundreds of
 * weights), whose flags are already set after its first run; a load costs less than a fenced store */
void api_buf_dev_bound(api_buf *b, bool written) {
    if (!atomic_load_explicit(&b->on_dev, memory_order_relaxed)) atomic_store(&b->on_dev, true);
    if (written && !atomic_load_explicit(&b->dev_newer, memory_order_relaxed)) atomic_store(&b->dev_newer, true);
}

void api_buf_dev_drop(api_buf *b) {
    if (!atomic_load(&b->on_dev)) return;
    api_dev_lock();
    if (dev_be && dev_be->ops->drop) dev_be->ops->drop(dev_be, b->data);
    atomic_store(&b->on_dev, false);
    atomic_store(&b->dev_newer, false);
    api_dev_unlock();
}

// ---- page-locked host memory ----

sb_status api_dev_host_alloc(size_t bytes, void **out) {
    *out = NULL;
    sb_status st = SB_OK;
    api_dev_lock();
    if (dev_be && dev_be->ops->host_alloc) st = dev_be->ops->host_alloc(dev_be, bytes, out);
    api_dev_unlock();
    if (st != SB_OK) *out = NULL;
    return st;
}

void api_dev_host_free(void *p) {
    if (!p) return;
    api_dev_lock();
    if (dev_be && dev_be->ops->host_free) dev_be->ops->host_free(dev_be, p);
    api_dev_unlock();
}
