/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/model_prefetch.c — read a mapped model's tensor data once at load, with progress.
 * Layer 2 (runtime).
 * Why: the weights are mmap'ed, so without this the load is instant and the first prefill pays
 * for reading the file (seconds for a multi-GB model on a cold cache or a slow filesystem), with
 * nothing to show for it. When the caller asks for progress, the load touches one byte of every
 * page of every tensor, in file order, and reports bytes done of the total after each tensor;
 * llama.cpp prefetches the same way (MAP_POPULATE). Cancellable between tensors. Tables the graph
 * only gathers rows of (`skip`: gemma4's per-layer embeddings, 1.9 GB of E2B's 3.4 GB) are not
 * read: a token touches one row of each, and reading them whole would only evict the weights.
 * Non-goals: reading in parallel, madvise tuning, progress without a callback (nothing is read).
 */
#include "runtime/model.h"
#include "base/status.h"

#include <stdint.h>

#define PAGE 4096

sb_status rt_model_prefetch(const gguf_file *f, const rt_model_params *p, const uint8_t *skip) {
    if (!p || !p->progress) return SB_OK;
    uint64_t total = 0, done = 0;
    for (int64_t i = 0; i < f->n_tensors; i++) total += skip && skip[i] ? 0 : f->tensors[i].nbytes;
    volatile uint8_t sink = 0;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        if (skip && skip[i]) continue; /* a gathered table: its rows are read when a token needs them */
        uint8_t acc = 0;
        for (uint64_t o = 0; o < t->nbytes; o += PAGE) acc ^= t->data[o];
        if (t->nbytes) acc ^= t->data[t->nbytes - 1];
        sink ^= acc;
        done += t->nbytes;
        if (done < total && p->progress(p->progress_user, done, total, t->name))
            return sb_fail(SB_ERR_CANCELLED, "model load cancelled by the progress callback after tensor \"%s\"", t->name);
    }
    (void)sink;
    if (p->progress(p->progress_user, total, total, NULL))
        return sb_fail(SB_ERR_CANCELLED, "model load cancelled by the progress callback at the end");
    return SB_OK;
}
