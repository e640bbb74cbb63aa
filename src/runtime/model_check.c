/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/model_check.c — the structural and value checks of model_check.h. A file that would run
 * as something other than what it describes (half its layers, a MoE run as dense, a tensor quietly
 * ignored, a NaN norm weight) is refused at load instead of producing wrong text.
 * Layer 2 (runtime).
 */
#include "runtime/model_check.h"
#include "base/status.h"
#include "quant/types.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- unsupported structure ----

/* The largest integer value of key (scalar or any array element); 0 when absent or not integer. */
static int64_t key_max(const gguf_file *f, const char *key) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return 0;
    uint64_t n = kv->type == SB_GGUF_ARRAY ? kv->count : 1;
    int64_t best = 0, v;
    for (uint64_t j = 0; j < n; j++)
        if (gguf_kv_i64(kv, j, &v) == SB_OK && v > best) best = v;
    return best;
}

static int is_moe_tensor(const char *name) {
    return strstr(name, "_exps.") || strstr(name, "_shexp.") || strstr(name, "ffn_gate_inp.") || strstr(name, "exp_probs_b.");
}

sb_status rt_check_unsupported(const gguf_file *f, const char *arch, const char *path) {
    static const char *const moe_keys[] = {"expert_count", "expert_used_count", "expert_shared_count"};
    char key[160];
    for (size_t i = 0; i < sizeof moe_keys / sizeof moe_keys[0]; i++) {
        snprintf(key, sizeof key, "%s.%s", arch, moe_keys[i]);
        int64_t v = key_max(f, key);
        if (v > 0)
            return sb_fail(SB_ERR_UNSUPPORTED, "model: %s: %s = %lld: mixture-of-experts models are not supported", path, key,
                           (long long)v);
    }
    for (int64_t i = 0; i < f->n_tensors; i++)
        if (is_moe_tensor(f->tensors[i].name))
            return sb_fail(SB_ERR_UNSUPPORTED, "model: %s: tensor \"%s\" is a mixture-of-experts weight: MoE models are not supported",
                           path, f->tensors[i].name);
    snprintf(key, sizeof key, "%s.nextn_predict_layers", arch);
    int64_t nextn = key_max(f, key);
    if (nextn > 0)
        return sb_fail(SB_ERR_UNSUPPORTED, "model: %s: %s = %lld: multi-token-prediction layers are not supported", path, key,
                       (long long)nextn);
    snprintf(key, sizeof key, "%s.attention.causal", arch);
    const gguf_kv *kv = gguf_find(f, key);
    int64_t causal = 1;
    if (kv && (kv->type == SB_GGUF_ARRAY || gguf_kv_i64(kv, 0, &causal) != SB_OK))
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: %s: key \"%s\" must be a bool", path, key);
    if (!causal)
        return sb_fail(SB_ERR_UNSUPPORTED, "model: %s: %s = false: non-causal (embedding) models are not supported", path, key);
    return SB_OK;
}

// ---- layers ----

/* The layer index of "blk.N.<rest>" (N decimal, no leading zero, <rest> non-empty), or -1. */
static int64_t layer_of(const char *name) {
    if (strncmp(name, "blk.", 4)) return -1;
    const char *p = name + 4;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return -1;
    int64_t n = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        n = n * 10 + (*p - '0');
        if (n > (int64_t)1 << 30) return -1;
    }
    return p[0] == '.' && p[1] ? n : -1;
}

sb_status rt_check_layers(const gguf_file *f, const rt_hparams *hp, const char *path) {
    int64_t top = -1;
    const char *top_name = NULL;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        int64_t l = layer_of(f->tensors[i].name);
        if (l > top) {
            top = l;
            top_name = f->tensors[i].name;
        }
    }
    if (top >= hp->n_layer)
        return sb_fail(SB_ERR_MODEL_HPARAM,
                       "model: %s: %s.block_count = %lld but the file holds tensors of layer %lld (\"%s\"): the key and the tensors disagree",
                       path, hp->arch, (long long)hp->n_layer, (long long)top, top_name);
    if (top + 1 < hp->n_layer)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: %s: %s.block_count = %lld but the file holds tensors of layers 0..%lld only", path,
                       hp->arch, (long long)hp->n_layer, (long long)top);
    char key[160];
    snprintf(key, sizeof key, "%s.vocab_size", hp->arch);
    const gguf_kv *kv = gguf_find(f, key);
    int64_t v = 0;
    if (kv && (kv->type == SB_GGUF_ARRAY || gguf_kv_i64(kv, 0, &v) != SB_OK))
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: %s: key \"%s\" must be an integer", path, key);
    if (kv && v != hp->n_vocab)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: %s: %s = %lld but token_embd.weight has %lld rows", path, key, (long long)v,
                       (long long)hp->n_vocab);
    return SB_OK;
}

// ---- unused tensors ----

sb_status rt_check_unused(const gguf_file *f, const uint8_t *bound, const char *arch, const char *path) {
    int64_t first = -1, n = 0;
    for (int64_t i = 0; i < f->n_tensors; i++)
        if (!bound[i]) {
            if (first < 0) first = i;
            n++;
        }
    if (first < 0) return SB_OK;
    char more[64] = "";
    if (n > 1) snprintf(more, sizeof more, " (and %lld more)", (long long)(n - 1));
    return sb_fail(SB_ERR_MODEL_TENSOR_EXTRA,
                   "model: %s: tensor \"%s\"%s is not used by the %s graph: unknown structure, refused rather than ignored", path,
                   f->tensors[first].name, more, arch);
}

// ---- values ----

int rt_tensor_is_1d(const gguf_tensor *t) { return t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1; }

sb_status rt_check_values(const gguf_tensor *t) {
    const qk_traits *tr = qk_get(t->type);
    const int64_t n = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
    uint64_t rb;
    if (!tr->to_float || qk_row_bytes(t->type, n, &rb)) return sb_fail(SB_ERR_INTERNAL, "scan: row bytes of %s", t->name);
    float *buf = (float *)malloc((size_t)n * sizeof *buf);
    if (!buf) return sb_fail(SB_ERR_OOM, "scan: %lld floats", (long long)n);
    const int divisor = !strcmp(t->name, "rope_freqs.weight");
    sb_status s = SB_OK;
    for (int64_t r = 0; r < rows && s == SB_OK; r++) {
        tr->to_float(t->data + (uint64_t)r * rb, buf, n);
        for (int64_t i = 0; i < n; i++) {
            if (!isfinite(buf[i])) {
                s = sb_fail(SB_ERR_MODEL_NAN, "model: tensor \"%s\" holds %s at row %lld, column %lld", t->name,
                            isnan(buf[i]) ? "NaN" : buf[i] > 0 ? "+Inf" : "-Inf", (long long)r, (long long)i);
                break;
            }
            if (divisor && !(buf[i] > 0)) {
                s = sb_fail(SB_ERR_MODEL_NAN, "model: tensor \"%s\" holds %g at column %lld: rope frequency factors divide the angle "
                            "and must be > 0", t->name, buf[i], (long long)i);
                break;
            }
        }
    }
    free(buf);
    return s;
}
