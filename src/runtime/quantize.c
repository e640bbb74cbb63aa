/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/quantize.c — llama-quantize's per-tensor rules and the quantize pipeline (quantize.h).
 * Layer 2 (runtime). The rules are transcribed from llama.cpp src/llama-quant.cpp for the mixes
 * this project writes (formats.md §4); the branches of the IQ1/IQ2/IQ3/TQ/MXFP4 mixes are left out
 * because those ftypes cannot be selected here.
 * Pipeline: type every tensor in llama-quantize order (counters advance in that order), size the
 * output, stage converted tensors in an unlinked scratch file (bounded memory), convert one tensor
 * at a time with the rows split over a thread pool, then let the GGUF writer stream header + data
 * to "<out>.tmp.<pid>" and rename. Tensors whose type does not change point at the input mapping.
 * Invariants: a tensor is converted from F32 only (F16/BF16/quantized sources are dequantized
 * first; quantized ones with a warning); non-finite F32 input fails like llama.cpp's
 * check_tensors does.
 */
#include "runtime/quantize.h"
#include "runtime/imatrix.h"
#include "base/ckd.h"
#include "base/file_io.h"
#include "base/status.h"
#include "base/threadpool.h"
#include "quant/quant.h"
#include "quant/types.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// ---- mixes ----

/* llama_ftype values (llama.h) */
enum {
    FT_F32 = 0, FT_F16 = 1, FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q8_0 = 7, FT_Q5_0 = 8, FT_Q5_1 = 9, FT_Q2_K = 10,
    FT_Q3_K_S = 11, FT_Q3_K_M = 12, FT_Q3_K_L = 13, FT_Q4_K_S = 14, FT_Q4_K_M = 15, FT_Q5_K_S = 16,
    FT_Q5_K_M = 17, FT_Q6_K = 18, FT_Q2_K_S = 21, FT_IQ4_NL = 25, FT_IQ4_XS = 30, FT_BF16 = 32,
};

static const rt_qmix mixes[] = {
    {"F32", FT_F32, SB_TYPE_F32},         {"F16", FT_F16, SB_TYPE_F16},
    {"BF16", FT_BF16, SB_TYPE_BF16},      {"Q8_0", FT_Q8_0, SB_TYPE_Q8_0},
    {"Q6_K", FT_Q6_K, SB_TYPE_Q6_K},      {"Q5_K_M", FT_Q5_K_M, SB_TYPE_Q5_K},
    {"Q5_K_S", FT_Q5_K_S, SB_TYPE_Q5_K},  {"Q5_1", FT_Q5_1, SB_TYPE_Q5_1},
    {"Q5_0", FT_Q5_0, SB_TYPE_Q5_0},      {"Q4_K_M", FT_Q4_K_M, SB_TYPE_Q4_K},
    {"Q4_K_S", FT_Q4_K_S, SB_TYPE_Q4_K},  {"Q4_1", FT_Q4_1, SB_TYPE_Q4_1},
    {"Q4_0", FT_Q4_0, SB_TYPE_Q4_0},      {"Q3_K_L", FT_Q3_K_L, SB_TYPE_Q3_K},
    {"Q3_K_M", FT_Q3_K_M, SB_TYPE_Q3_K},  {"Q3_K_S", FT_Q3_K_S, SB_TYPE_Q3_K},
    {"Q2_K", FT_Q2_K, SB_TYPE_Q2_K},      {"Q2_K_S", FT_Q2_K_S, SB_TYPE_Q2_K},
    {"IQ4_NL", FT_IQ4_NL, SB_TYPE_IQ4_NL},
    {"IQ4_XS", FT_IQ4_XS, SB_TYPE_IQ4_XS},
};

/* llama-quantize's aliases */
static const struct { const char *alias, *mix; } aliases[] = {
    {"Q3_K", "Q3_K_M"}, {"Q4_K", "Q4_K_M"}, {"Q5_K", "Q5_K_M"},
};

const rt_qmix *rt_qmix_find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcasecmp(name, aliases[i].alias)) name = aliases[i].mix;
    char *end = (char *)name;
    long ft = name[0] >= '0' && name[0] <= '9' ? strtol(name, &end, 10) : -1;
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++)
        if (!strcasecmp(name, mixes[i].name) || (ft >= 0 && !*end && ft == mixes[i].ftype)) return &mixes[i];
    return NULL;
}

/* Mixes llama-quantize offers that this build cannot write: the IQ1-IQ3 grids, TQ, MXFP4 and the
 * newest formats. */
static bool mix_unsupported(const char *name) {
    static const char *const names[] = {
        "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ1_S", "IQ1_M", "IQ3_XXS", "IQ3_XS", "IQ3_S", "IQ3_M",
        "TQ1_0", "TQ2_0", "MXFP4_MOE", "NVFP4", "Q1_0", "Q2_0", "COPY",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcasecmp(name, names[i])) return true;
    return false;
}

const rt_qmix *rt_qmix_at(int i) {
    return (i >= 0 && (size_t)i < sizeof mixes / sizeof mixes[0]) ? &mixes[i] : NULL;
}

// ---- eligibility, category, order ----

static bool ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !memcmp(s + n - m, suf, m);
}

bool rt_quant_allows(const char *name, int n_dims) {
    static const char *const never[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
        "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
        "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
        "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
        "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
        "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.",
        "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
    };
    if (n_dims < 2) return false;
    if (!ends_with(name, "weight")) return false;
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        if (strstr(name, never[i])) return false;
    return strcmp(name, "position_embd.weight") && strcmp(name, "token_types.weight");
}

typedef enum cat {
    CAT_OUTPUT, CAT_TOKEN_EMBD, CAT_QKV, CAT_KV_B, CAT_V, CAT_K, CAT_Q, CAT_ATTN_OUT, CAT_UP, CAT_GATE,
    CAT_DOWN, CAT_OTHER
} cat;

static cat category(const char *n) {
    if (!strcmp(n, "output.weight")) return CAT_OUTPUT;
    if (!strcmp(n, "token_embd.weight") || !strcmp(n, "per_layer_token_embd.weight")) return CAT_TOKEN_EMBD;
    if (strstr(n, "attn_qkv.weight")) return CAT_QKV;
    if (strstr(n, "attn_kv_b.weight")) return CAT_KV_B;
    if (strstr(n, "attn_v.weight")) return CAT_V;
    if (strstr(n, "attn_k.weight")) return CAT_K;
    if (strstr(n, "attn_q.weight")) return CAT_Q;
    if (strstr(n, "attn_output.weight")) return CAT_ATTN_OUT;
    if (strstr(n, "ffn_up")) return CAT_UP;
    if (strstr(n, "ffn_gate")) return CAT_GATE;
    if (strstr(n, "ffn_down")) return CAT_DOWN;
    return CAT_OTHER;
}

static bool is_attn_v_like(cat c) { return c == CAT_V || c == CAT_QKV || c == CAT_KV_B; }

/* sscanf("blk.%d.") semantics: digits after "blk." followed by '.', else -1 */
static int layer_of(const char *n) {
    int layer;
    char dot;
    if (sscanf(n, "blk.%d%c", &layer, &dot) == 2 && dot == '.') return layer;
    return -1;
}

int rt_quant_order(const char *a, const char *b) {
    int la = layer_of(a), lb = layer_of(b);
    if (la != lb) return la < lb ? -1 : 1;
    return strcmp(a, b);
}

void rt_qstate_init(rt_qstate *st, const char *const *names, int64_t n) {
    memset(st, 0, sizeof *st);
    for (int64_t i = 0; i < n; i++) {
        cat c = category(names[i]);
        if (is_attn_v_like(c)) st->n_attn_v++;
        if (c == CAT_OUTPUT) st->has_output = true;
    }
}

// ---- type rules (llama_tensor_get_type_impl + tensor_type_fallback) ----

static bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static int blck(int type) { return (int)qk_get(type)->blck; }

static sb_status layer_info(const rt_qmodel *m, const char *name, int counter, int *i_layer) {
    *i_layer = counter;
    if (m->n_expert > 1) {
        int l = layer_of(name);
        if (l < 0) return sb_fail(SB_ERR_MODEL_HPARAM, "quantize: cannot determine the layer of expert tensor \"%s\"", name);
        if (l >= m->n_layer)
            return sb_fail(SB_ERR_MODEL_HPARAM, "quantize: tensor \"%s\" has layer %d, block_count is %d", name, l, m->n_layer);
        *i_layer = l;
    }
    return SB_OK;
}

static sb_status mix_rules(const rt_qmix *mx, const rt_qmodel *m, rt_qstate *st, const char *name, cat c,
                           const int64_t ne[4], int *type) {
    const int ft = mx->ftype;
    const bool imatrix = st->rules && st->rules->has_imatrix;
    int t = *type;
    if (c == CAT_OUTPUT || (!st->has_output && c == CAT_TOKEN_EMBD)) {
        if (st->rules && st->rules->output_type >= 0) t = st->rules->output_type;
        else if (m->falcon || ne[0] % blck(t) != 0) t = SB_TYPE_Q8_0;
        else if (t != SB_TYPE_Q8_0) t = SB_TYPE_Q6_K;
    } else if (c == CAT_TOKEN_EMBD) {
        /* untied embeddings keep the default type under every mix offered here */
    } else if (is_attn_v_like(c)) {
        if (ft == FT_Q2_K) t = m->n_gqa >= 4 ? SB_TYPE_Q4_K : SB_TYPE_Q3_K;
        else if (ft == FT_Q2_K_S && m->n_gqa >= 4) t = SB_TYPE_Q4_K;
        else if (ft == FT_Q3_K_M) t = st->i_attn_v < 2 ? SB_TYPE_Q5_K : SB_TYPE_Q4_K;
        else if (ft == FT_Q3_K_L) t = SB_TYPE_Q5_K;
        else if ((ft == FT_IQ4_NL || ft == FT_IQ4_XS) && m->n_gqa >= 4) t = SB_TYPE_Q5_K;
        else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && use_more_bits(st->i_attn_v, st->n_attn_v)) t = SB_TYPE_Q6_K;
        else if (ft == FT_Q4_K_S && st->i_attn_v < 4) t = SB_TYPE_Q5_K;
        if (m->is_70b && (t == SB_TYPE_Q3_K || t == SB_TYPE_Q4_K)) t = SB_TYPE_Q5_K;
        if (m->n_expert == 8) t = SB_TYPE_Q8_0;
        st->i_attn_v++;
    } else if (c == CAT_K) {
        if (m->n_expert == 8) t = SB_TYPE_Q8_0;
    } else if (c == CAT_Q) {
        /* only IQ3 mixes change attn_q */
    } else if (c == CAT_DOWN) {
        int i, n = m->n_layer;
        SB_TRY(layer_info(m, name, st->i_ffn_down, &i));
        if (ft == FT_Q2_K) t = SB_TYPE_Q3_K;
        else if (ft == FT_Q2_K_S) {
            if (i < n / 8) t = SB_TYPE_Q4_K;
        } else if (ft == FT_Q3_K_M)
            t = i < n / 16 ? SB_TYPE_Q5_K : (!m->falcon || use_more_bits(i, n)) ? SB_TYPE_Q4_K : SB_TYPE_Q3_K;
        else if (ft == FT_Q3_K_L) t = m->falcon ? SB_TYPE_Q4_K : SB_TYPE_Q5_K;
        else if (ft == FT_Q4_K_M) {
            if (m->falcon) t = i < n / 16 ? SB_TYPE_Q6_K : use_more_bits(i, n) ? SB_TYPE_Q5_K : SB_TYPE_Q4_K;
            else if (use_more_bits(i, n)) t = SB_TYPE_Q6_K;
        } else if (i < n / 8 && (ft == FT_IQ4_NL || ft == FT_IQ4_XS) && !imatrix) t = SB_TYPE_Q5_K;
        else if (ft == FT_Q5_K_M && use_more_bits(i, n)) t = SB_TYPE_Q6_K;
        else if (ft == FT_Q4_K_S && !m->falcon && i < n / 8) t = SB_TYPE_Q5_K;
        else if ((ft == FT_Q4_0 || ft == FT_Q5_0) && imatrix && i < n / 8)
            t = ft == FT_Q4_0 ? SB_TYPE_Q4_1 : SB_TYPE_Q5_1; /* llama.cpp: "guard against craziness" */
        st->i_ffn_down++;
    } else if (c == CAT_ATTN_OUT) {
        if (!m->falcon) {
            if (m->n_expert == 8) {
                if (ft == FT_Q2_K || ft == FT_Q3_K_S || ft == FT_Q3_K_M || ft == FT_IQ4_NL || ft == FT_Q4_K_S ||
                    ft == FT_Q4_K_M || ft == FT_IQ4_XS)
                    t = SB_TYPE_Q5_K;
            } else {
                if (ft == FT_Q2_K) t = SB_TYPE_Q3_K;
                else if (ft == FT_Q3_K_M) t = SB_TYPE_Q4_K;
                else if (ft == FT_Q3_K_L) t = SB_TYPE_Q5_K;
            }
        } else if (ft == FT_Q3_K_L) {
            t = SB_TYPE_Q4_K;
        }
    } else if (c == CAT_GATE || c == CAT_UP) {
        int i;
        SB_TRY(layer_info(m, name, c == CAT_GATE ? st->i_ffn_gate : st->i_ffn_up, &i));
        if (c == CAT_GATE) st->i_ffn_gate++;
        else st->i_ffn_up++;
    }
    *type = t;
    return SB_OK;
}

static sb_status fallback(rt_qstate *st, const char *name, const int64_t ne[4], int *type) {
    int t = *type;
    if (ne[0] % blck(t) == 0) return SB_OK;
    st->n_fallback++;
    int r;
    switch (t) {
    case SB_TYPE_IQ1_S: case SB_TYPE_IQ1_M: case SB_TYPE_IQ2_XXS: case SB_TYPE_IQ2_XS: case SB_TYPE_IQ2_S:
    case SB_TYPE_IQ3_XXS: case SB_TYPE_IQ3_S: case SB_TYPE_IQ4_XS: r = SB_TYPE_IQ4_NL; break;
    case SB_TYPE_Q2_0: case SB_TYPE_Q2_K: case SB_TYPE_Q3_K: case SB_TYPE_TQ1_0: case SB_TYPE_TQ2_0: r = SB_TYPE_Q4_0; break;
    case SB_TYPE_Q4_K: r = SB_TYPE_Q5_0; break;
    case SB_TYPE_Q5_K: r = SB_TYPE_Q5_1; break;
    case SB_TYPE_Q6_K: r = SB_TYPE_Q8_0; break;
    default:
        return sb_fail(SB_ERR_UNSUPPORTED, "quantize: tensor \"%s\": row length %lld is not a multiple of %d (type %s) "
                       "and llama-quantize defines no fallback for %s", name, (long long)ne[0], blck(t),
                       qk_get(t)->name, qk_get(t)->name);
    }
    if (ne[0] % blck(r) != 0) r = SB_TYPE_F16;
    sb_log(SB_LOG_DEBUG, "quantize: %s: row length %lld is not a multiple of %d (%s): falling back to %s", name,
           (long long)ne[0], blck(t), qk_get(t)->name, qk_get(r)->name);
    *type = r;
    return SB_OK;
}

/* llama_tensor_get_type: the explicit output / token-embedding types win (no fallback), then the
 * first --tensor-type match or (unless --pure) the mix rules, then the shape fallback. A tensor
 * typed by a --tensor-type match does not advance the mix counters (llama.cpp skips the rules). */
sb_status rt_quant_tensor_type(const rt_qmix *m, const rt_qmodel *model, rt_qstate *st, const char *name,
                               int n_dims, const int64_t ne[4], int cur_type, int *out_type) {
    const rt_qrules *r = st->rules;
    const cat c = category(name);
    if (!rt_quant_allows(name, n_dims) || (r && r->leave_output && !strcmp(name, "output.weight"))) {
        *out_type = cur_type;
        return SB_OK;
    }
    if (r && r->token_embd_type >= 0 && c == CAT_TOKEN_EMBD) {
        *out_type = r->token_embd_type;
        return SB_OK;
    }
    if (r && r->output_type >= 0 && c == CAT_OUTPUT) {
        *out_type = r->output_type;
        return SB_OK;
    }
    int t = m->default_type;
    if (qk_get(t)->is_quantized) {
        int manual = rt_qrules_match(r, name);
        if (manual == -2) return sb_fail(SB_ERR_INTERNAL, "quantize: --tensor-type: matching \"%s\" failed", name);
        if (manual >= 0) {
            if (manual != t)
                sb_log(SB_LOG_DEBUG, "quantize: %s: --tensor-type override %s -> %s", name, qk_get(t)->name,
                       qk_get(manual)->name);
            t = manual;
        } else if (!r || !r->pure) {
            SB_TRY(mix_rules(m, model, st, name, c, ne, &t));
        }
        SB_TRY(fallback(st, name, ne, &t));
    }
    *out_type = t;
    return SB_OK;
}

sb_status rt_qmodel_from_gguf(const gguf_file *f, rt_qmodel *out) {
    memset(out, 0, sizeof *out);
    sb_strview arch;
    if (gguf_get_str(f, "general.architecture", &arch) != SB_OK) {
        sb_error_clear();
        return SB_OK;
    }
    char a[64], key[128];
    size_t al = arch.len < sizeof a - 1 ? arch.len : sizeof a - 1;
    memcpy(a, arch.ptr, al);
    a[al] = 0;
    out->falcon = !strcmp(a, "falcon");
    const gguf_kv *kv;
    int64_t v;
    snprintf(key, sizeof key, "%s.block_count", a);
    if ((kv = gguf_find(f, key)) && gguf_kv_i64(kv, 0, &v) == SB_OK && v > 0 && v < (1 << 20)) out->n_layer = (int)v;
    int64_t nh = 0, nkv = 0;
    snprintf(key, sizeof key, "%s.attention.head_count", a);
    if ((kv = gguf_find(f, key)) && kv->count > 0) (void)gguf_kv_i64(kv, 0, &nh);
    nkv = nh;
    snprintf(key, sizeof key, "%s.attention.head_count_kv", a);
    if ((kv = gguf_find(f, key)) && kv->count > 0) (void)gguf_kv_i64(kv, 0, &nkv);
    if (nh > 0 && nkv > 0) out->n_gqa = (int)(nh / nkv);
    snprintf(key, sizeof key, "%s.expert_count", a);
    if ((kv = gguf_find(f, key)) && gguf_kv_i64(kv, 0, &v) == SB_OK && v > 0 && v < (1 << 20)) out->n_expert = (int)v;
    out->is_70b = !strcmp(a, "llama") && out->n_layer == 80 && nh != nkv;
    sb_error_clear();
    return SB_OK;
}

// ---- threaded row work ----

typedef struct rowjob {
    int kind;                 /* 0 dequantize src->f32, 1 fill, 2 quantize f32->dst */
    int type;                 /* source type (0) or destination type (2) */
    int64_t ne0;
    uint64_t row_bytes;
    const uint8_t *src;
    float *f32;
    uint8_t *dst;
    rt_fill_fn fill;
    void *fill_ctx;
    int64_t tensor_index;
    int64_t row_base;         /* fill / quantize: absolute row of the job's row 0 */
    const float *qw;          /* quantize: importance weights, ne1 rows per matrix, NULL = none */
    int64_t ne1, n_mat;       /* quantize with qw: rows per matrix, matrices (qw has n_mat*ne0) */
    _Atomic int failed;
    sb_status status;
    char msg[512];
} rowjob;

static void rowjob_fail(rowjob *j, sb_status s) {
    int expect = 0;
    if (atomic_compare_exchange_strong(&j->failed, &expect, 1)) {
        j->status = s;
        snprintf(j->msg, sizeof j->msg, "%s", sb_last_error());
    }
}

static void rowjob_run(void *ctx, int64_t r0, int64_t r1, int tid) {
    (void)tid;
    rowjob *j = (rowjob *)ctx;
    if (atomic_load(&j->failed)) return;
    const int64_t nr = r1 - r0;
    float *f = j->f32 + r0 * j->ne0;
    if (j->kind == 0) {
        const qk_traits *t = qk_get(j->type);
        t->to_float(j->src + (size_t)r0 * j->row_bytes, f, nr * j->ne0);
    } else if (j->kind == 1) {
        sb_status s = j->fill(j->fill_ctx, j->tensor_index, j->row_base + r0, nr, f);
        if (s != SB_OK) rowjob_fail(j, s);
    } else if (!j->qw) {
        sb_status s = qk_quantize_chunk(j->type, f, j->dst + (size_t)r0 * j->row_bytes, nr, j->ne0);
        if (s != SB_OK) rowjob_fail(j, s);
    } else {
        /* llama-quantize quantizes each expert matrix with its own importance row */
        for (int64_t r = r0; r < r1;) {
            const int64_t abs = j->row_base + r, mat = abs / j->ne1 % j->n_mat;
            int64_t end = r + (j->ne1 - abs % j->ne1);
            if (end > r1) end = r1;
            sb_status s = qk_quantize_chunk_w(j->type, j->f32 + r * j->ne0, j->dst + (size_t)r * j->row_bytes, end - r,
                                              j->ne0, j->qw + mat * j->ne0);
            if (s != SB_OK) {
                rowjob_fail(j, s);
                return;
            }
            r = end;
        }
    }
}

static sb_status rowjob_do(tp_pool *pool, rowjob *j, int64_t nrows) {
    atomic_store(&j->failed, 0);
    int64_t grain = j->ne0 >= 65536 ? 1 : 65536 / (j->ne0 > 0 ? j->ne0 : 1);
    tp_run(pool, nrows, grain, rowjob_run, j);
    if (atomic_load(&j->failed)) return sb_fail(j->status, "%s", j->msg);
    return SB_OK;
}

// ---- pipeline ----

/* elements converted per block when the F32 rows must be produced first (dequantize / fill) */
#define F32_BLOCK ((int64_t)1 << 22)

typedef struct plan {
    int64_t src;        /* index into ts */
    int type;           /* output type */
    bool convert;       /* needs f32 -> type (else copied from ts[src].data) */
    uint64_t nbytes;    /* output bytes */
    uint64_t off;       /* offset in the scratch file when convert */
    const float *qw;    /* importance weights (ne[2] rows of ne[0]) when converting with an imatrix */
} plan;

/* tensor_requires_imatrix: Q2_K tensors of a Q2_K_S file, token embeddings and output aside (the
 * IQ1-IQ3 types that always need one are not written here). */
static bool requires_imatrix(const rt_qmix *m, const char *name, int n_dims, int type) {
    return m->ftype == FT_Q2_K_S && type == SB_TYPE_Q2_K && rt_quant_allows(name, n_dims) &&
           strcmp(name, "token_embd.weight") && strcmp(name, "per_layer_token_embd.weight") && strcmp(name, "output.weight");
}

/* Every imatrix entry names a tensor of the model (an imatrix of another model is refused). */
static sb_status imatrix_matches_model(const rt_imatrix *im, const rt_qtensor *ts, int64_t n) {
    for (int64_t e = 0; e < im->n; e++) {
        int64_t i = 0;
        while (i < n && strcmp(ts[i].name, im->entries[e].name)) i++;
        if (i == n)
            return sb_fail(SB_ERR_FORMAT, "imatrix %s: entry \"%s\" names no tensor of the model (an imatrix made "
                           "for another model?)", im->path, im->entries[e].name);
    }
    return SB_OK;
}

/* The weights for tensor t being converted, as llama-quantize picks them: none when the imatrix
 * has no entry (a debug line says so); an entry of another size is an error, except for the
 * token embeddings, whose entry llama-quantize ignores. */
static sb_status imatrix_weights(const rt_imatrix *im, const rt_qtensor *t, const float **qw) {
    *qw = NULL;
    const rt_imatrix_entry *e = im ? rt_imatrix_find(im, t->name) : NULL;
    if (!im) return SB_OK;
    if (!e) {
        sb_log(SB_LOG_DEBUG, "quantize: imatrix has no weights for %s", t->name);
        return SB_OK;
    }
    if (e->n_per_row == t->ne[0] && e->n_mat == t->ne[2] && t->ne[3] == 1) {
        *qw = e->values;
        return SB_OK;
    }
    if (!strcmp(t->name, "token_embd.weight") || !strcmp(t->name, "per_layer_token_embd.weight")) {
        sb_log(SB_LOG_DEBUG, "quantize: imatrix size of %s does not fit; quantized without it", t->name);
        return SB_OK;
    }
    return sb_fail(SB_ERR_FORMAT, "imatrix %s: entry \"%s\" has %lld x %lld values; the tensor needs %lld x %lld "
                   "(columns x matrices)", im->path, t->name, (long long)e->n_per_row, (long long)e->n_mat,
                   (long long)t->ne[0], (long long)t->ne[2]);
}

typedef struct named { const char *name; int64_t idx; } named;
static int cmp_named(const void *a, const void *b) {
    const named *x = (const named *)a, *y = (const named *)b;
    int c = rt_quant_order(x->name, y->name);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

static int online_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

static sb_status tensor_bytes(int type, const int64_t ne[4], uint64_t *out) {
    uint64_t row, n;
    if (qk_row_bytes(type, ne[0], &row)) return SB_ERR_RANGE;
    n = row;
    for (int d = 1; d < 4; d++)
        if (ne[d] < 0 || ckd_mul(&n, n, (uint64_t)ne[d])) return SB_ERR_RANGE;
    *out = n;
    return SB_OK;
}

/* An unlinked, mmap'ed scratch file of `size` bytes next to `out` (in P_tmpdir when out is a
 * device or FIFO, which is written straight to: never a scratch file in /dev). */
static sb_status scratch_open(const char *out, uint64_t size, uint8_t **map) {
    *map = NULL;
    if (size == 0) return SB_OK;
    char path[4096], final[4096];
    fio_out_kind kind;
    SB_TRY(fio_out_check(out, &kind, final, sizeof final));
    int n = kind == FIO_OUT_REPLACE ? snprintf(path, sizeof path, "%s.scratch.XXXXXX", final)
                                    : snprintf(path, sizeof path, "%s/sb-quantize.scratch.XXXXXX", P_tmpdir);
    if (n < 0 || n >= (int)sizeof path) return sb_fail(SB_ERR_INVALID_ARG, "quantize: output path too long");
    int fd = mkstemp(path);
    if (fd < 0) return sb_fail(SB_ERR_IO, "%s: %s", path, strerror(errno));
    unlink(path);
    /* reserve the blocks now: a full disk must fail here, not as SIGBUS on a mapped write */
    int fe = posix_fallocate(fd, 0, (off_t)size);
    if (fe != 0) {
        close(fd);
        return sb_fail(SB_ERR_IO, "%s: reserving %llu bytes of scratch space: %s", path, (unsigned long long)size,
                       strerror(fe));
    }
    void *p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return sb_fail(SB_ERR_IO, "%s: mmap %llu bytes: %s", path, (unsigned long long)size, strerror(e));
    *map = (uint8_t *)p;
    return SB_OK;
}

static sb_status check_finite(const float *x, int64_t n, const char *name) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return sb_fail(SB_ERR_MODEL_NAN, "quantize: tensor \"%s\" has a non-finite value (%g) at element %lld", name,
                           (double)x[i], (long long)i);
    return SB_OK;
}

/* Copied F32/F16/BF16 tensors are checked too (llama.cpp validates every tensor it loads). */
static sb_status check_finite_raw(int type, const void *data, uint64_t n, const char *name) {
    if (type == SB_TYPE_F32) return check_finite((const float *)data, (int64_t)n, name);
    if (type != SB_TYPE_F16 && type != SB_TYPE_BF16) return SB_OK;
    const uint16_t mask = type == SB_TYPE_F16 ? 0x7C00 : 0x7F80;
    const uint8_t *b = (const uint8_t *)data;
    for (uint64_t i = 0; i < n; i++) {
        uint16_t h = (uint16_t)(b[2 * i] | b[2 * i + 1] << 8);
        if ((h & mask) == mask)
            return sb_fail(SB_ERR_MODEL_NAN, "quantize: tensor \"%s\" (%s) has a non-finite value (0x%04x) at element %llu",
                           name, qk_get(type)->name, h, (unsigned long long)i);
    }
    return SB_OK;
}

/* ggml_validate_row_data on what was written: F16/BF16 elements and the fp16 scales of every block
 * must be finite (an input too large for the type overflows them; llama-quantize then fails). */
static sb_status check_output(int type, const uint8_t *q, uint64_t nbytes, const char *name) {
    int off[2] = {-1, -1};
    switch (type) {
    case SB_TYPE_F16: case SB_TYPE_BF16:
        if (check_finite_raw(type, q, nbytes / 2, name) != SB_OK)
            return sb_fail(SB_ERR_RANGE, "quantize: tensor \"%s\": a value is too large for %s (it becomes infinite)",
                           name, qk_get(type)->name);
        return SB_OK;
    case SB_TYPE_Q4_0: case SB_TYPE_Q5_0: case SB_TYPE_Q8_0: case SB_TYPE_IQ4_NL: case SB_TYPE_IQ4_XS: off[0] = 0; break;
    case SB_TYPE_Q4_1: case SB_TYPE_Q5_1: case SB_TYPE_Q4_K: case SB_TYPE_Q5_K: off[0] = 0; off[1] = 2; break;
    case SB_TYPE_Q2_K: off[0] = 80; off[1] = 82; break;
    case SB_TYPE_Q3_K: off[0] = 108; break;
    case SB_TYPE_Q6_K: off[0] = 208; break;
    default: return SB_OK;
    }
    const uint64_t bs = (uint64_t)qk_get(type)->type_size;
    for (uint64_t b = 0; b < nbytes / bs; b++)
        for (int k = 0; k < 2 && off[k] >= 0; k++) {
            const uint8_t *h = q + b * bs + off[k];
            if (((uint16_t)(h[0] | h[1] << 8) & 0x7C00) == 0x7C00)
                return sb_fail(SB_ERR_RANGE, "quantize: tensor \"%s\": block %llu of the %s data has a non-finite "
                               "scale: the input values are too large for this type", name, (unsigned long long)b,
                               qk_get(type)->name);
        }
    return SB_OK;
}

/* llama-quantize records the imatrix as KV overrides, appended in this order: the file name and
 * the first dataset (each cut to 127 bytes), the number of entries, the chunk count when > 0. */
static sb_status imatrix_metadata(gguf_writer *w, const rt_imatrix *im) {
    SB_TRY(gguf_writer_set_str(w, "quantize.imatrix.file", im->path, strlen(im->path) < 127 ? strlen(im->path) : 127));
    if (im->dataset)
        SB_TRY(gguf_writer_set_str(w, "quantize.imatrix.dataset", im->dataset,
                                   strlen(im->dataset) < 127 ? strlen(im->dataset) : 127));
    SB_TRY(gguf_writer_set_u32(w, "quantize.imatrix.entries_count", (uint32_t)im->n));
    if ((int32_t)im->chunk_count > 0) SB_TRY(gguf_writer_set_u32(w, "quantize.imatrix.chunks_count", im->chunk_count));
    return SB_OK;
}

sb_status rt_quantize_tensors(gguf_writer *w, const rt_qmix *m, const rt_qmodel *model, const rt_qtensor *ts,
                              int64_t n, rt_fill_fn fill, void *fill_ctx, const char *out, const rt_qopts *o) {
    if (!w || !m || !model || (!ts && n) || n < 0 || !out) return sb_fail(SB_ERR_INVALID_ARG, "quantize: NULL argument");
    sb_status s = SB_OK;
    named *order = (named *)malloc((size_t)(n ? n : 1) * sizeof *order);
    const char **names = (const char **)calloc((size_t)(n ? n : 1), sizeof *names);
    plan *pl = (plan *)calloc((size_t)(n ? n : 1), sizeof *pl);
    tp_pool *pool = NULL;
    uint8_t *scratch = NULL;
    float *f32buf = NULL;
    uint64_t scratch_size = 0;
    if (!order || !names || !pl) {
        s = sb_fail(SB_ERR_OOM, "quantize: plan for %lld tensors", (long long)n);
        goto done;
    }
    for (int64_t i = 0; i < n; i++) order[i] = (named){ts[i].name, i};
    qsort(order, (size_t)n, sizeof *order, cmp_named);
    for (int64_t i = 0; i < n; i++) names[i] = order[i].name;
    if (o && o->imatrix && (s = imatrix_matches_model(o->imatrix, ts, n)) != SB_OK) goto done;

    // -- type every tensor, in order --
    rt_qstate st;
    rt_qstate_init(&st, names, n);
    st.rules = o ? o->rules : NULL;
    rt_qstats stats = {0};
    uint64_t total_elems = 0, max_f32 = 0;
    int n_requant = 0;
    for (int64_t k = 0; k < n; k++) {
        const rt_qtensor *t = &ts[order[k].idx];
        plan *p = &pl[k];
        p->src = order[k].idx;
        int n_dims = 1;
        for (int d = 3; d > 0; d--)
            if (t->ne[d] != 1) {
                n_dims = d + 1;
                break;
            }
        s = rt_quant_tensor_type(m, model, &st, t->name, n_dims, t->ne, t->type, &p->type);
        if (s != SB_OK) goto done;
        uint64_t nel = 1;
        for (int d = 0; d < 4; d++) nel *= (uint64_t)t->ne[d];
        p->convert = p->type != t->type || !t->data;
        if (tensor_bytes(p->type, t->ne, &p->nbytes) != SB_OK) {
            s = sb_fail(SB_ERR_INVALID_ARG, "quantize: tensor \"%s\": shape does not fit type %s", t->name,
                        qk_get(p->type)->name);
            goto done;
        }
        uint64_t in_bytes = 0;
        if (t->data && tensor_bytes(t->type, t->ne, &in_bytes) != SB_OK) in_bytes = 0;
        stats.n_elements += nel;
        stats.bytes_in += t->data ? in_bytes : nel * sizeof(float);
        stats.bytes_out += p->nbytes;
        if (p->convert) {
            const qk_traits *src = qk_get(t->type);
            if (t->data && src && src->is_quantized && !(o && o->allow_requantize)) {
                s = sb_fail(SB_ERR_INVALID_ARG, "quantize: requantizing from type %s is disabled (tensor \"%s\" -> %s); "
                            "quantize the F32/F16/BF16 original, or allow it (sb quantize --allow-requantize) at a "
                            "loss of quality", src->name, t->name, qk_get(p->type)->name);
                goto done;
            }
            if (t->data && t->type != SB_TYPE_F32 && (!src || !src->to_float)) {
                s = sb_fail(SB_ERR_UNSUPPORTED, "quantize: tensor \"%s\" has type %s, which cannot be converted to %s "
                            "(no dequantizer)", t->name, src && src->name ? src->name : "?", qk_get(p->type)->name);
                goto done;
            }
            if (!t->data && (!fill || t->type != SB_TYPE_F32)) {
                s = sb_fail(SB_ERR_INVALID_ARG, "quantize: tensor \"%s\" has no data", t->name);
                goto done;
            }
            if (!qk_chunk_quantizer(p->type)) {
                s = sb_fail(SB_ERR_UNSUPPORTED, "quantize: tensor \"%s\": no quantizer for %s", t->name, qk_get(p->type)->name);
                goto done;
            }
            if (t->data && src->is_quantized) n_requant++;
            if ((s = imatrix_weights(o ? o->imatrix : NULL, t, &p->qw)) != SB_OK) goto done;
            if (requires_imatrix(m, t->name, n_dims, p->type) && !p->qw) {
                s = sb_fail(SB_ERR_INVALID_ARG, "quantize: %s needs an importance matrix (--imatrix) for tensor \"%s\" "
                            "(%s)%s", m->name, t->name, qk_get(p->type)->name,
                            o && o->imatrix ? ": the imatrix has no entry for it" : "");
                goto done;
            }
            p->off = scratch_size;
            if (ckd_pad(&scratch_size, scratch_size + p->nbytes, 64)) {
                s = sb_fail(SB_ERR_RANGE, "quantize: output too large");
                goto done;
            }
            if (!t->data || t->type != SB_TYPE_F32) {
                uint64_t need = t->ne[0] >= F32_BLOCK ? (uint64_t)t->ne[0] : (uint64_t)(F32_BLOCK / t->ne[0] * t->ne[0]);
                if (need > nel) need = nel;
                if (need > max_f32) max_f32 = need;
            }
        }
        total_elems += nel;
    }
    if (n_requant)
        sb_log(SB_LOG_WARN, "quantize: %d tensor(s) are already quantized; they are dequantized to F32 and "
               "re-quantized to %s, which loses more quality than quantizing the original F32/F16/BF16 file",
               n_requant, m->name);

    // -- metadata (llama-quantize: copy all, set quantization_version, then file_type) --
    if ((s = gguf_writer_set_u32(w, "general.quantization_version", 2)) != SB_OK) goto done;
    if ((s = gguf_writer_set_u32(w, "general.file_type", (uint32_t)m->ftype)) != SB_OK) goto done;
    gguf_writer_remove(w, "split.no");
    gguf_writer_remove(w, "split.count");
    gguf_writer_remove(w, "split.tensors.count");
    if (o && o->imatrix && (s = imatrix_metadata(w, o->imatrix)) != SB_OK) goto done;

    // -- convert --
    int nt = o && o->n_threads > 0 ? o->n_threads : online_cores();
    if (nt > 256) nt = 256;
    if ((s = tp_create(nt, &pool)) != SB_OK) goto done;
    if ((s = scratch_open(out, scratch_size, &scratch)) != SB_OK) goto done;
    if (max_f32) {
        f32buf = (float *)malloc((size_t)max_f32 * sizeof(float));
        if (!f32buf) {
            s = sb_fail(SB_ERR_OOM, "quantize: %llu floats of scratch", (unsigned long long)max_f32);
            goto done;
        }
    }
    uint64_t done_elems = 0;
    for (int64_t k = 0; k < n; k++) {
        const plan *p = &pl[k];
        const rt_qtensor *t = &ts[p->src];
        const int64_t ne0 = t->ne[0], nrows = t->ne[1] * t->ne[2] * t->ne[3];
        const uint64_t nel = (uint64_t)ne0 * (uint64_t)nrows;
        const void *data = t->data;
        if (p->convert && nel) {
            uint64_t out_row;
            (void)qk_row_bytes(p->type, ne0, &out_row);
            if (t->data && t->type == SB_TYPE_F32) {
                if ((s = check_finite((const float *)t->data, (int64_t)nel, t->name)) != SB_OK) goto done;
                rowjob j = {.kind = 2, .type = p->type, .ne0 = ne0, .row_bytes = out_row,
                            .f32 = (float *)t->data, .dst = scratch + p->off, .qw = p->qw, .ne1 = t->ne[1],
                            .n_mat = t->ne[2]};
                s = rowjob_do(pool, &j, nrows);
            } else {
                /* dequantize or generate a block of rows at a time into f32buf, then quantize it */
                uint64_t in_row = 0;
                if (t->data) (void)qk_row_bytes(t->type, ne0, &in_row);
                const int64_t block = ne0 >= F32_BLOCK ? 1 : F32_BLOCK / ne0;
                /* generated tensors under o->pool_rows: only the first rows are made, the rest repeat them */
                const int64_t made = !t->data && o && o->pool_rows > 0 && o->pool_rows < nrows ? o->pool_rows : nrows;
                for (int64_t r = 0; r < made && s == SB_OK; r += block) {
                    const int64_t nr = made - r < block ? made - r : block;
                    rowjob j = {.ne0 = ne0, .f32 = f32buf, .fill = fill, .fill_ctx = fill_ctx,
                                .tensor_index = p->src, .row_base = r};
                    if (t->data) {
                        j.kind = 0;
                        j.type = t->type;
                        j.src = (const uint8_t *)t->data + (size_t)r * in_row;
                        j.row_bytes = in_row;
                    } else {
                        j.kind = 1;
                    }
                    if ((s = rowjob_do(pool, &j, nr)) != SB_OK) break;
                    if (t->data && (s = check_finite(f32buf, nr * ne0, t->name)) != SB_OK) break;
                    j = (rowjob){.kind = 2, .type = p->type, .ne0 = ne0, .row_bytes = out_row, .f32 = f32buf,
                                 .dst = scratch + p->off + (size_t)r * out_row, .row_base = r, .qw = p->qw,
                                 .ne1 = t->ne[1], .n_mat = t->ne[2]};
                    s = rowjob_do(pool, &j, nr);
                }
                uint8_t *dst = scratch + p->off;
                for (int64_t r = made; r < nrows && s == SB_OK; r++)
                    memcpy(dst + (size_t)r * out_row, dst + (size_t)(r % made) * out_row, (size_t)out_row);
            }
            if (s != SB_OK) {
                sb_fail_context(s, "quantize: tensor \"%s\"", t->name);
                goto done;
            }
            data = scratch + p->off;
            if ((s = check_output(p->type, scratch + p->off, p->nbytes, t->name)) != SB_OK) goto done;
        } else if (p->convert) {
            data = scratch ? scratch + p->off : NULL;
        } else if ((s = check_finite_raw(t->type, t->data, nel, t->name)) != SB_OK) {
            goto done;
        }
        sb_log(SB_LOG_DEBUG, "quantize: [%4lld/%4lld] %-36s %6s -> %6s", (long long)k + 1, (long long)n, t->name,
               qk_get(t->type)->name, qk_get(p->type)->name);
        if ((s = gguf_writer_add_tensor(w, t->name, p->type, 4, t->ne, p->nbytes ? data : NULL)) != SB_OK) goto done;
        done_elems += nel;
        if (o && o->progress && o->progress(o->progress_user, done_elems, total_elems, t->name)) {
            s = sb_fail(SB_ERR_CANCELLED, "quantize: cancelled by the progress callback after \"%s\"", t->name);
            goto done;
        }
    }
    if (st.n_fallback)
        sb_log(SB_LOG_INFO, "quantize: %d of %lld tensor(s) needed a fallback type", st.n_fallback, (long long)n);
    s = gguf_writer_write(w, out);
    if (s == SB_OK && o && o->stats) *o->stats = stats;

done:
    if (scratch) munmap(scratch, (size_t)scratch_size);
    free(f32buf);
    tp_free(pool);
    free(pl);
    free(names);
    free(order);
    return s;
}

sb_status rt_quantize_file(const char *in, const char *out, const char *type_name, const rt_qopts *o) {
    if (!in || !out || !type_name) return sb_fail(SB_ERR_INVALID_ARG, "quantize: NULL argument");
    const rt_qmix *m = rt_qmix_find(type_name);
    if (!m && mix_unsupported(type_name))
        return sb_fail(SB_ERR_UNSUPPORTED, "quantize: type %s is not supported by this build: its quantizers (the "
                       "IQ1/IQ2/IQ3 grids, TQ, FP4) are not implemented", type_name);
    if (!m) {
        char list[512] = "";
        for (int i = 0; rt_qmix_at(i); i++) {
            strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, rt_qmix_at(i)->name, sizeof list - strlen(list) - 1);
        }
        return sb_fail(SB_ERR_INVALID_ARG, "quantize: unknown type \"%s\" (one of: %s)", type_name, list);
    }
    char final[4096];
    fio_out_kind kind;
    SB_TRY(fio_out_check(out, &kind, final, sizeof final)); /* a refused output fails before the work */
    struct stat si, so;
    if (stat(in, &si) == 0 && stat(final, &so) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
        return sb_fail(SB_ERR_INVALID_ARG, "quantize: the output %s is the input file itself (it would be replaced while read)", out);
    rt_qrules rules;
    rt_qoverride *ov = NULL;
    SB_TRY(rt_qrules_build(o, &rules, &ov));
    if (o && !qk_get(m->default_type)->is_quantized && (o->n_tt > 0 || o->pure || o->imatrix_path))
        sb_log(SB_LOG_WARN, "quantize: without effect on the tensors of a %s file (not a quantized type; llama-quantize "
               "ignores them too): %s%s%s", m->name,
               o->n_tt > 0 ? "--tensor-type " : "", o->pure ? "--pure " : "", o->imatrix_path ? "--imatrix" : "");
    rt_qopts opts = o ? *o : (rt_qopts){0};
    opts.rules = &rules;
    rt_imatrix im = {0};
    if (o && o->imatrix_path) {
        sb_status si = rt_imatrix_load(o->imatrix_path, &im);
        if (si != SB_OK) {
            rt_qrules_free(ov, rules.n_overrides);
            return si;
        }
        rules.has_imatrix = true;
        opts.imatrix = &im;
    }
    gguf_file f;
    sb_status s = gguf_open(in, &f);
    if (s != SB_OK) {
        rt_qrules_free(ov, rules.n_overrides);
        rt_imatrix_free(&im);
        return s;
    }
    gguf_writer *w = NULL;
    rt_qtensor *ts = NULL;
    s = gguf_writer_create(&w);
    if (s != SB_OK) goto done;
    for (int64_t i = 0; i < f.n_kv && s == SB_OK; i++) s = gguf_writer_copy_kv(w, &f.kvs[i]);
    if (s != SB_OK) goto done;
    rt_qmodel model;
    if ((s = rt_qmodel_from_gguf(&f, &model)) != SB_OK) goto done;
    ts = (rt_qtensor *)calloc((size_t)(f.n_tensors ? f.n_tensors : 1), sizeof *ts);
    if (!ts) {
        s = sb_fail(SB_ERR_OOM, "quantize: %lld tensors", (long long)f.n_tensors);
        goto done;
    }
    for (int64_t i = 0; i < f.n_tensors; i++) {
        const gguf_tensor *t = &f.tensors[i];
        ts[i] = (rt_qtensor){.name = t->name, .n_dims = (int)t->n_dims, .type = t->type, .data = t->data};
        memcpy(ts[i].ne, t->ne, sizeof ts[i].ne);
        if (!t->data && t->nbytes == 0) ts[i].data = f.bytes; /* zero-size tensor: nothing to convert */
    }
    s = rt_quantize_tensors(w, m, &model, ts, f.n_tensors, NULL, NULL, out, &opts);
    if (s != SB_OK) sb_fail_context(s, "%s -> %s", in, out);
done:
    rt_qrules_free(ov, rules.n_overrides);
    rt_imatrix_free(&im);
    free(ts);
    gguf_writer_free(w);
    gguf_close(&f);
    return s;
}
