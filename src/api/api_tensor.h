/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * api/api_tensor.h — what the tensor, graph and eager files of the public API share: the tensor
 * handle over a reference-counted buffer, and the op table of the public names (sb_tensor_op,
 * sb_graph_op) mapped onto the IR builders.
 * Layer 3 (api); never included outside src/api.
 * Invariants: a tensor's data holds exactly ir_nbytes of its type and shape; a buffer is freed when
 * its last tensor (or graph/program binding) drops it; a weight buffer points into a model's
 * mapping and is never written. Host and device copies (api_device.c): a buffer's host memory is
 * current unless dev_newer; a device copy exists only where on_dev, and then it follows every host
 * write (api_buf_host_wrote) and goes with the memory.
 */
#ifndef SB_API_TENSOR_H
#define SB_API_TENSOR_H

#include "sonicboom.h"
#include "graph/ir.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct api_buf {
    atomic_int refs;        /* tensors, graphs and programs holding it (atomic: a binding may free from a finalizer thread) */
    void *data;
    uint64_t bytes;
    bool owned;             /* allocated here (else a model's weight: read-only) */
    bool page_locked;       /* owned, from the shared device backend's host_alloc (api_dev_host_alloc) */
    /* the shared device backend may hold a copy of data (it was bound into a device run): host writes
     * are sent on to it, and it is dropped when the memory is freed. Both flags change only under the
     * device lock (api_dev_lock); atomic so a host-only path can test them without it */
    atomic_bool on_dev;
    atomic_bool dev_newer;  /* the device copy is newer than data (a device run wrote it: a KV cache) */
} api_buf;

struct sb_tensor {
    api_buf *buf;
    int device;             /* SB_DEVICE_CPU or SB_DEVICE_CUDA: where eager ops on it run */
    int type;
    int n_dims;
    int64_t ne[4];
    bool is_view;
    char name[IR_NAME_MAX]; /* the GGUF name of a weight view, else "" */
};

api_buf *api_buf_ref(api_buf *b);
void api_buf_unref(api_buf *b);

/* A new handle on buf (a reference taken) with this type and shape, on the CPU (set ->device after). */
sb_status api_tensor_wrap(api_buf *buf, int type, int n_dims, const int64_t ne[4], bool is_view, const char *name,
                          sb_tensor **out);
/* A new tensor of a checked type and shape on a resolved device (SB_DEVICE_CPU or _CUDA), its own
 * zeroed buffer (data NULL) or a copy of data's ir_nbytes. */
sb_status api_tensor_new(int device, int type, int n_dims, const int64_t ne[4], const void *data, sb_tensor **out);
/* api_tensor_new's zeroed tensor on the CUDA device with page-locked host memory where the shared
 * device backend allocates it (a backend without host_alloc: ordinary memory, as api_tensor_new). */
sb_status api_tensor_new_page_locked(int type, int n_dims, const int64_t ne[4], sb_tensor **out);
/* Do 4 dims (each >= 1) hold at most 2^48 elements (no overflow anywhere downstream)? */
bool api_dims_ok(const int64_t ne[4]);
/* "f32[64,4,3]" into buf (for messages). */
const char *api_shape_str(char *buf, size_t cap, int type, const int64_t ne[4]);

/* The IR input kind a source of op must be (for eager graphs): SB_INPUT_TOKENS, SB_INPUT_POS,
 * SB_INPUT_CACHE or SB_INPUT_DATA; -1 when op is unknown. */
int api_op_src_kind(const char *op, int i);

/* Apply op to values of an IR graph (the public table of sonicboom.h); checks everything first and
 * appends nothing on failure (SB_ERR_INVALID_ARG naming the op and shapes, SB_ERR_NOT_FOUND). */
sb_status api_graph_apply(ir_graph *g, const char *op, const ir_ref *src, int n_src, const double *args, int n_args,
                          ir_ref *out);

struct backend;
struct plan;
/* A CPU backend of n_threads threads (0 = all cores). */
sb_status api_cpu_backend(int n_threads, struct backend **out);

// ---- the shared device backend and host/device coherence (api_device.c) ----

/* The device lock: held around every call into the shared device backend (recursive: a buffer freed
 * while it is held drops its device copy under it). Take it after api_eager.c's CPU lock, never before. */
void api_dev_lock(void);
void api_dev_unlock(void);
/* device (SB_DEVICE_CPU, _CUDA or _AUTO) resolved for fn into SB_DEVICE_CPU or SB_DEVICE_CUDA: CUDA
 * opens the shared backend on first use (SB_ERR_UNSUPPORTED: a build without CUDA; SB_ERR_DEVICE: no
 * usable GPU, with the reason); AUTO is CUDA where that works, else the CPU (the reason logged). */
sb_status api_dev_resolve(const char *fn, int device, int *out);
/* The shared device backend (once api_dev_resolve gave SB_DEVICE_CUDA); the lock held. */
struct backend *api_dev_backend(void);
/* Tests: be (not owned) becomes the shared device backend, a stand-in for CUDA on a machine
 * without one (NULL: none again; a backend opened before is leaked, as at exit). */
void api_dev_install(struct backend *be);

/* Before the host reads b: a newer device copy is downloaded first. */
sb_status api_buf_host_read(api_buf *b);
/* After the host wrote b: its device copy, if any, takes the new bytes (and is no longer newer). */
sb_status api_buf_host_wrote(api_buf *b);
/* b was bound into a run of the shared device backend (the lock held): it may have a device copy
 * now; written (a KV cache): that copy is newer than the host's. */
void api_buf_dev_bound(api_buf *b, bool written);
/* b's memory is about to be freed: its device copy goes (api_buf_unref calls it). */
void api_buf_dev_drop(api_buf *b);
/* Page-locked host memory of bytes from the shared device backend (opened: api_dev_resolve gave
 * SB_DEVICE_CUDA), *out NULL where that backend allocates none (no host_alloc op); SB_ERR_OOM.
 * Freed by api_dev_host_free. */
sb_status api_dev_host_alloc(size_t bytes, void **out);
void api_dev_host_free(void *p);

#endif
