/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * api/api_output.c — sb_output_*: the library's output-file rule (base/file_io.h) for callers,
 * so `sb` writes its own files (logits references) exactly as the library writes models.
 * Layer 3 (api): argument checks and the handle only.
 */
#include "sonicboom.h"
#include "base/file_io.h"
#include "base/status.h"

#include <stdlib.h>

struct sb_output {
    fio_out o;
    int failed; /* a write failed: the temp file is already gone */
};

SB_API sb_status sb_output_open(const char *path, sb_output **out) {
    if (!out) return sb_fail(SB_ERR_INVALID_ARG, "sb_output_open: NULL out");
    *out = NULL;
    sb_output *h = (sb_output *)calloc(1, sizeof *h);
    if (!h) return sb_fail(SB_ERR_OOM, "sb_output handle");
    sb_status s = fio_out_open(path, &h->o);
    if (s != SB_OK) {
        free(h);
        return s;
    }
    *out = h;
    return SB_OK;
}

SB_API sb_status sb_output_write(sb_output *o, const void *data, size_t size) {
    if (!o || (!data && size)) return sb_fail(SB_ERR_INVALID_ARG, "sb_output_write: NULL argument");
    if (o->failed) return sb_fail(SB_ERR_IO, "%s: an earlier write failed", o->o.path);
    sb_status s = fio_out_write(&o->o, data, size);
    if (s != SB_OK) o->failed = 1;
    return s;
}

SB_API sb_status sb_output_commit(sb_output *o) {
    if (!o) return sb_fail(SB_ERR_INVALID_ARG, "sb_output_commit: NULL output");
    sb_status s = o->failed ? sb_fail(SB_ERR_IO, "%s: an earlier write failed", o->o.path) : fio_out_commit(&o->o);
    fio_out_abort(&o->o);
    free(o);
    return s;
}

SB_API void sb_output_abort(sb_output *o) {
    if (!o) return;
    fio_out_abort(&o->o);
    free(o);
}
