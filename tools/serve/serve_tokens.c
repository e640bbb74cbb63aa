/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/serve/serve_tokens.c — llama-server's POST /tokenize ({"content", "add_special" (false),
 * "parse_special" (true), "with_pieces" (false)} -> {"tokens": [ids or {"id","piece"}]}) and
 * POST /detokenize ({"tokens": [ids]} -> {"content"}). Runs on the connection thread: the
 * vocabulary is immutable and safe to share. Ids out of range are a 400 naming them.
 */
#include "serve.h"

#include "sb.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int flag(const cJSON *o, const char *name, int def, int *out, serve_error *err) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    *out = def;
    if (!f || cJSON_IsNull(f)) return 0;
    if (!cJSON_IsBool(f)) return serve_error_set(err, 400, "invalid_request_error", name, "'%s' must be true or false", name);
    *out = cJSON_IsTrue(f);
    return 0;
}

static cJSON *piece_object(const serve_engine *e, int32_t id) {
    char buf[256];
    size_t n = 0;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", id);
    sb_status st = sb_token_to_piece(e->vocab, id, 1, buf, sizeof buf, &n);
    int lossy = 0;
    char *clean = sb_utf8_clean(buf, st == SB_OK ? n : 0, &lossy);
    cJSON_AddStringToObject(o, "piece", clean ? clean : "");
    free(clean);
    return o;
}

char *serve_tokenize(const serve_engine *e, const cJSON *body, serve_error *err) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(body, "content");
    int add_special, parse_special, with_pieces;
    if (!cJSON_IsString(c)) {
        serve_error_set(err, 400, "invalid_request_error", "content", "'content' must be a string");
        return NULL;
    }
    if (flag(body, "add_special", 0, &add_special, err) || flag(body, "parse_special", 1, &parse_special, err) ||
        flag(body, "with_pieces", 0, &with_pieces, err))
        return NULL;
    size_t len = strlen(c->valuestring), n = 0;
    sb_status st = sb_tokenize(e->vocab, c->valuestring, len, add_special, parse_special, NULL, 0, &n);
    int32_t *ids = NULL;
    if (st == SB_OK || st == SB_ERR_BUFFER_TOO_SMALL) {
        ids = malloc((n + 1) * sizeof *ids);
        st = ids ? sb_tokenize(e->vocab, c->valuestring, len, add_special, parse_special, ids, n, &n) : SB_ERR_OOM;
    }
    if (st != SB_OK) {
        serve_error_set(err, 400, "invalid_request_error", "content", "%s: %s", sb_status_str(st), sb_last_error());
        free(ids);
        return NULL;
    }
    cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "tokens");
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, with_pieces ? piece_object(e, ids[i]) : cJSON_CreateNumber(ids[i]));
    free(ids);
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

char *serve_detokenize(const serve_engine *e, const cJSON *body, serve_error *err) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(body, "tokens"), *x;
    if (!cJSON_IsArray(t)) {
        serve_error_set(err, 400, "invalid_request_error", "tokens", "'tokens' must be an array of token ids");
        return NULL;
    }
    size_t n = (size_t)cJSON_GetArraySize(t), k = 0, len = 0;
    int32_t *ids = malloc((n + 1) * sizeof *ids);
    if (!ids) {
        serve_error_set(err, 500, "server_error", NULL, "out of memory");
        return NULL;
    }
    cJSON_ArrayForEach(x, t) {
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 0 ||
            x->valuedouble >= (double)e->info.n_vocab) {
            serve_error_set(err, 400, "invalid_request_error", "tokens", "'tokens[%zu]' must be a token id in [0, %lld)", k,
                            (long long)e->info.n_vocab);
            free(ids);
            return NULL;
        }
        ids[k++] = (int32_t)x->valuedouble;
    }
    sb_status st = sb_detokenize(e->vocab, ids, n, 0, NULL, 0, &len);
    char *text = NULL;
    if (st == SB_OK || st == SB_ERR_BUFFER_TOO_SMALL) {
        text = malloc(len + 1);
        st = text ? sb_detokenize(e->vocab, ids, n, 0, text, len + 1, &len) : SB_ERR_OOM;
    }
    free(ids);
    if (st != SB_OK) {
        serve_error_set(err, 400, "invalid_request_error", "tokens", "%s: %s", sb_status_str(st), sb_last_error());
        free(text);
        return NULL;
    }
    int lossy = 0;
    char *clean = sb_utf8_clean(text, len, &lossy);
    free(text);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "content", clean ? clean : "");
    free(clean);
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}
