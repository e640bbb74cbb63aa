/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/tokenizer/vocab_gguf.c — fill a tok_vocab_spec from the tokenizer.* keys of an open
 * GGUF file (architectures.md §8.1) and build the vocabulary.
 * Layer 2 (runtime). Reads metadata only, never tensors.
 * Invariants: every key is checked for presence, type and array length before use; a wrong key
 * is SB_ERR_VOCAB with the key named. Ids stored as signed -1 mean "none"; any other id outside
 * [0, n_vocab) is an error (robustness.md T2).
 * Non-goals: tokenizer.ggml.precompiled_charsmap / UGM keys.
 */
#include "runtime/tokenizer/tok_internal.h"

#include "base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sb_status get_cstr(const gguf_file *f, const char *key, char **out) {
    *out = NULL;
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return SB_OK;
    sb_strview s;
    if (kv->type != SB_GGUF_STRING || gguf_kv_str(kv, 0, &s) != SB_OK)
        return sb_fail(SB_ERR_VOCAB, "%s has type %s, expected a string", key, gguf_type_name(kv->type));
    if (memchr(s.ptr, 0, s.len)) return sb_fail(SB_ERR_VOCAB, "%s contains a NUL byte", key);
    char *c = malloc(s.len + 1);
    if (!c) return sb_fail(SB_ERR_OOM, "%s: %zu bytes", key, s.len);
    memcpy(c, s.ptr, s.len);
    c[s.len] = 0;
    *out = c;
    return SB_OK;
}

static sb_status get_array(const gguf_file *f, const char *key, bool strings, int64_t want, const gguf_kv **out) {
    *out = NULL;
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return SB_OK;
    if (kv->type != SB_GGUF_ARRAY || (strings && kv->elem_type != SB_GGUF_STRING) ||
        (!strings && (kv->elem_type == SB_GGUF_STRING || kv->elem_type == SB_GGUF_ARRAY)))
        return sb_fail(SB_ERR_VOCAB, "%s has type %s of %s, expected an array of %s", key, gguf_type_name(kv->type),
                       gguf_type_name(kv->elem_type), strings ? "strings" : "numbers");
    if (want >= 0 && kv->count != (uint64_t)want)
        return sb_fail(SB_ERR_VOCAB, "%s has %llu entries but tokenizer.ggml.tokens has %lld", key,
                       (unsigned long long)kv->count, (long long)want);
    *out = kv;
    return SB_OK;
}

static sb_status get_id(const gguf_file *f, const char *name, int64_t *out) {
    char key[64];
    snprintf(key, sizeof key, "tokenizer.ggml.%s", name);
    *out = -1;
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return SB_OK;
    int64_t v;
    if (kv->type == SB_GGUF_ARRAY || kv->type == SB_GGUF_STRING || kv->type == SB_GGUF_FLOAT32 ||
        kv->type == SB_GGUF_FLOAT64 || gguf_kv_i64(kv, 0, &v) != SB_OK)
        return sb_fail(SB_ERR_VOCAB, "%s has type %s, expected an integer token id", key, gguf_type_name(kv->type));
    *out = v; /* anything outside [-1, n_vocab) is rejected by tok_vocab_build, naming the key */
    return SB_OK;
}

static sb_status get_flag(const gguf_file *f, const char *key, int *out) {
    *out = -1;
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return SB_OK;
    int64_t v;
    if (kv->type == SB_GGUF_ARRAY || kv->type == SB_GGUF_STRING || gguf_kv_i64(kv, 0, &v) != SB_OK)
        return sb_fail(SB_ERR_VOCAB, "%s has type %s, expected a bool", key, gguf_type_name(kv->type));
    *out = v != 0;
    return SB_OK;
}

sb_status tok_vocab_load_gguf(const gguf_file *f, tok_vocab **out) {
    if (!out) return sb_fail(SB_ERR_INVALID_ARG, "tok_vocab_load_gguf: out is NULL");
    *out = NULL;
    if (!f) return sb_fail(SB_ERR_INVALID_ARG, "tok_vocab_load_gguf: file is NULL");
    tok_vocab_spec s;
    tok_vocab_spec_init(&s);
    char *model = NULL, *pre = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    sb_status st;
    const gguf_kv *tokens, *kscores, *ktypes, *merges, *tmpl;
    if ((st = get_cstr(f, "tokenizer.ggml.model", &model)) != SB_OK) goto done;
    if (!model) {
        st = sb_fail(SB_ERR_VOCAB, "tokenizer.ggml.model is missing (the file has no vocabulary)");
        goto done;
    }
    if ((st = get_cstr(f, "tokenizer.ggml.pre", &pre)) != SB_OK) goto done;
    if ((st = get_array(f, "tokenizer.ggml.tokens", true, -1, &tokens)) != SB_OK) goto done;
    if (!tokens) {
        st = sb_fail(SB_ERR_VOCAB, "tokenizer.ggml.tokens is missing");
        goto done;
    }
    int64_t n = tokens->count > INT32_MAX ? INT32_MAX : (int64_t)tokens->count;
    if ((st = get_array(f, "tokenizer.ggml.scores", false, n, &kscores)) != SB_OK) goto done;
    if ((st = get_array(f, "tokenizer.ggml.token_type", false, n, &ktypes)) != SB_OK) goto done;
    if ((st = get_array(f, "tokenizer.ggml.merges", true, -1, &merges)) != SB_OK) goto done;
    if ((!strcmp(model, "gpt2") || !strcmp(model, "gemma4")) && (!merges || merges->count == 0)) {
        /* a BPE vocabulary without its merges would tokenize byte by byte: valid ids, wrong text */
        st = sb_fail(SB_ERR_VOCAB, "tokenizer.ggml.merges is %s: a \"%s\" (BPE) vocabulary needs its merges", merges ? "empty" : "missing",
                     model);
        goto done;
    }
    s.model = model;
    s.pre = pre;
    s.n_tokens = (int64_t)tokens->count;
    s.texts = tokens->strs;
    if (kscores) {
        scores = malloc((size_t)n * sizeof *scores);
        if (!scores) { st = sb_fail(SB_ERR_OOM, "tokenizer.ggml.scores: %lld entries", (long long)n); goto done; }
        for (int64_t i = 0; i < n; i++) {
            double d;
            if ((st = gguf_kv_f64(kscores, (uint64_t)i, &d)) != SB_OK) {
                st = sb_fail(SB_ERR_VOCAB, "tokenizer.ggml.scores[%lld] is not a number", (long long)i);
                goto done;
            }
            scores[i] = (float)d;
        }
        s.scores = scores;
    }
    if (ktypes) {
        types = malloc((size_t)n * sizeof *types);
        if (!types) { st = sb_fail(SB_ERR_OOM, "tokenizer.ggml.token_type: %lld entries", (long long)n); goto done; }
        for (int64_t i = 0; i < n; i++) {
            int64_t t;
            if (gguf_kv_i64(ktypes, (uint64_t)i, &t) != SB_OK || t < INT32_MIN || t > INT32_MAX) {
                st = sb_fail(SB_ERR_VOCAB, "tokenizer.ggml.token_type[%lld] is not an int32", (long long)i);
                goto done;
            }
            types[i] = (int32_t)t;
        }
        s.types = types;
    }
    if (merges) {
        s.n_merges = (int64_t)merges->count;
        s.merges = merges->strs;
    }
    if ((st = get_id(f, "bos_token_id", &s.bos)) != SB_OK || (st = get_id(f, "eos_token_id", &s.eos)) != SB_OK ||
        (st = get_id(f, "eot_token_id", &s.eot)) != SB_OK || (st = get_id(f, "eom_token_id", &s.eom)) != SB_OK ||
        (st = get_id(f, "unknown_token_id", &s.unk)) != SB_OK ||
        (st = get_id(f, "seperator_token_id", &s.sep)) != SB_OK ||
        (st = get_id(f, "padding_token_id", &s.pad)) != SB_OK || (st = get_id(f, "mask_token_id", &s.mask)) != SB_OK)
        goto done;
    if ((st = get_flag(f, "tokenizer.ggml.add_bos_token", &s.add_bos)) != SB_OK ||
        (st = get_flag(f, "tokenizer.ggml.add_eos_token", &s.add_eos)) != SB_OK ||
        (st = get_flag(f, "tokenizer.ggml.add_space_prefix", &s.add_space_prefix)) != SB_OK)
        goto done;
    tmpl = gguf_find(f, "tokenizer.chat_template");
    if (tmpl) {
        sb_strview t;
        if (tmpl->type != SB_GGUF_STRING || gguf_kv_str(tmpl, 0, &t) != SB_OK) {
            st = sb_fail(SB_ERR_VOCAB, "tokenizer.chat_template has type %s, expected a string", gguf_type_name(tmpl->type));
            goto done;
        }
        s.chat_template = t.ptr;
        s.chat_template_len = t.len;
    }
    st = tok_vocab_build(&s, out);
done:
    free(model);
    free(pre);
    free(scores);
    free(types);
    return st;
}
