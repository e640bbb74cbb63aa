/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * api/api_tools.c — the public model-file tools: sb_quantize_file (runtime/quantize.h) and
 * sb_synth_model (runtime/synth.h), with their name listings.
 * Layer 3 (api): argument checks and parameter translation only.
 */
#include "sonicboom.h"
#include "base/status.h"
#include "runtime/quantize.h"
#include "runtime/synth.h"

#include <stddef.h>

SB_API sb_status sb_quantize_file(const char *in, const char *out, const char *type_name, const sb_quantize_params *p) {
    if (!in || !out || !type_name) return sb_fail(SB_ERR_INVALID_ARG, "sb_quantize_file: NULL argument");
    rt_qopts o = {0};
    if (p) o = (rt_qopts){.n_threads = p->n_threads, .progress = p->progress, .progress_user = p->progress_user};
    return rt_quantize_file(in, out, type_name, &o);
}

SB_API const char *sb_quantize_type_name(int i) {
    const rt_qmix *m = rt_qmix_at(i);
    return m ? m->name : NULL;
}

SB_API sb_status sb_synth_model(const char *preset, const char *out, const sb_synth_params *p) {
    if (!preset || !out) return sb_fail(SB_ERR_INVALID_ARG, "sb_synth_model: NULL argument");
    rt_synth_opts o = {.type_name = "F32"};
    if (p) {
        o.type_name = p->type_name ? p->type_name : "F32";
        o.vocab_path = p->vocab_path;
        o.seed = p->seed;
        o.q = (rt_qopts){.n_threads = p->n_threads, .progress = p->progress, .progress_user = p->progress_user,
                         .pool_rows = p->fast ? 256 : 0};
    }
    return rt_synth_model(preset, out, &o);
}

SB_API const char *sb_synth_preset_name(int i) {
    const rt_synth_preset *p = rt_synth_preset_at(i);
    return p ? p->name : NULL;
}

SB_API const char *sb_synth_preset_desc(int i) {
    const rt_synth_preset *p = rt_synth_preset_at(i);
    return p ? p->desc : NULL;
}
