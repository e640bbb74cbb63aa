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
#include <stdlib.h>
#include <string.h>

SB_API sb_status sb_quantize_file(const char *in, const char *out, const char *type_name, const sb_quantize_params *p) {
    if (!in || !out || !type_name) return sb_fail(SB_ERR_INVALID_ARG, "sb_quantize_file: NULL argument");
    rt_qopts o = {.allow_requantize = true};
    if (p) {
        o.n_threads = p->n_threads;
        o.progress = p->progress;
        o.progress_user = p->progress_user;
    }
    return rt_quantize_file(in, out, type_name, &o);
}

SB_API void sb_quantize_default_options(sb_quantize_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
}

enum { MAX_TENSOR_TYPES = 4096 };

SB_API sb_status sb_quantize_file_ex(const char *in, const char *out, const char *type_name,
                                     const sb_quantize_params *p, const sb_quantize_options *o,
                                     sb_quantize_stats *stats) {
    if (!in || !out || !type_name) return sb_fail(SB_ERR_INVALID_ARG, "sb_quantize_file_ex: NULL argument");
    sb_quantize_options d;
    sb_quantize_default_options(&d);
    if (o && o->struct_size < sizeof(sb_quantize_options))
        return sb_fail(SB_ERR_INVALID_ARG, "sb_quantize_file_ex: options.struct_size %zu is too small (fill the "
                       "options with sb_quantize_default_options)", o->struct_size);
    if (!o) o = &d;
    if (o->n_tensor_types > MAX_TENSOR_TYPES || (o->n_tensor_types && !o->tensor_types))
        return sb_fail(SB_ERR_INVALID_ARG, "sb_quantize_file_ex: %zu tensor-type overrides (at most %d, non-NULL list)",
                       o->n_tensor_types, MAX_TENSOR_TYPES);
    const char **tp = NULL, **tt = NULL;
    if (o->n_tensor_types) {
        tp = (const char **)calloc(o->n_tensor_types, sizeof *tp);
        tt = (const char **)calloc(o->n_tensor_types, sizeof *tt);
        if (!tp || !tt) {
            free(tp);
            free(tt);
            return sb_fail(SB_ERR_OOM, "sb_quantize_file_ex: %zu overrides", o->n_tensor_types);
        }
        for (size_t i = 0; i < o->n_tensor_types; i++) {
            tp[i] = o->tensor_types[i].pattern;
            tt[i] = o->tensor_types[i].type_name;
        }
    }
    rt_qstats st = {0};
    rt_qopts q = {.allow_requantize = o->allow_requantize != 0, .pure = o->pure != 0,
                  .leave_output = o->leave_output_tensor != 0, .output_type_name = o->output_tensor_type,
                  .token_embd_type_name = o->token_embedding_type, .tt_patterns = tp, .tt_types = tt,
                  .n_tt = (int)o->n_tensor_types, .imatrix_path = o->imatrix_path, .stats = &st};
    if (p) {
        q.n_threads = p->n_threads;
        q.progress = p->progress;
        q.progress_user = p->progress_user;
    }
    sb_status s = rt_quantize_file(in, out, type_name, &q);
    free(tp);
    free(tt);
    if (s == SB_OK && stats) *stats = (sb_quantize_stats){st.n_elements, st.bytes_in, st.bytes_out};
    return s;
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

SB_API const char *sb_synth_preset_type(int i) {
    const rt_synth_preset *p = rt_synth_preset_at(i);
    return p ? rt_synth_default_type(p) : NULL;
}
