/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/serve/serve_output.c — the JSON `sb serve` sends, built with cJSON in OpenAI's shapes
 * (../shared/docs/conventions.md §3c): error objects, chat.completion / text_completion results,
 * their stream chunks as SSE events ("data: {...}\n\n", "data: [DONE]\n\n"), the model list.
 * Generated text is made valid UTF-8 first (a byte token can end a reply mid-character).
 */
#include "serve.h"

#include "sb.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *serve_model_id(const serve_engine *e) {
    if (e->cfg->alias) return e->cfg->alias;
    const char *slash = strrchr(e->cfg->model_path, '/');
    return slash ? slash + 1 : e->cfg->model_path;
}

/* Print and free root; NULL when out of memory. */
static char *finish_json(cJSON *root) {
    char *s = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return s;
}

/* Add text (n bytes, made valid UTF-8) as o[name]. */
static void add_text(cJSON *o, const char *name, const char *text, size_t n) {
    int lossy = 0;
    char *clean = sb_utf8_clean(text ? text : "", text ? n : 0, &lossy);
    cJSON_AddStringToObject(o, name, clean ? clean : "");
    free(clean);
}

char *serve_json_error(const serve_error *e) {
    cJSON *root = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(root, "error");
    cJSON_AddNumberToObject(err, "code", e->status);
    add_text(err, "message", e->message, strlen(e->message)); /* it may quote the request's bytes */
    cJSON_AddStringToObject(err, "type", e->type ? e->type : "invalid_request_error");
    if (e->param) cJSON_AddStringToObject(err, "param", e->param);
    else cJSON_AddNullToObject(err, "param");
    return finish_json(root);
}

static cJSON *base_object(const serve_engine *e, const serve_job *j, int chunk) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", j->id);
    const char *object = j->req.kind == SERVE_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    cJSON_AddStringToObject(root, "object", object);
    cJSON_AddNumberToObject(root, "created", (double)j->created);
    cJSON_AddStringToObject(root, "model", serve_model_id(e));
    return root;
}

static void add_usage(cJSON *root, const serve_job *j) {
    cJSON *u = cJSON_AddObjectToObject(root, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)j->req.n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)j->n_generated);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(j->req.n_prompt + (size_t)j->n_generated));
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", (double)j->n_cached);
}

char *serve_json_result(const serve_engine *e, const serve_job *j) {
    cJSON *root = base_object(e, j, 0), *choices = cJSON_AddArrayToObject(root, "choices");
    for (int i = 0; i < j->req.n; i++) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddItemToArray(choices, c);
        cJSON_AddNumberToObject(c, "index", i);
        if (j->req.kind == SERVE_CHAT) {
            cJSON *m = cJSON_AddObjectToObject(c, "message");
            cJSON_AddStringToObject(m, "role", "assistant");
            add_text(m, "content", j->text[i].data, j->text[i].len);
        } else {
            add_text(c, "text", j->text[i].data, j->text[i].len);
        }
        if (j->logprobs[i]) cJSON_AddItemReferenceToObject(c, "logprobs", j->logprobs[i]);
        else cJSON_AddNullToObject(c, "logprobs");
        cJSON_AddStringToObject(c, "finish_reason", j->finish[i] ? j->finish[i] : "stop");
    }
    add_usage(root, j);
    return finish_json(root);
}

/* Append "data: JSON\n\n" for root (freed) to j->sse. */
static int add_event(serve_job *j, cJSON *root) {
    char *s = finish_json(root);
    if (!s) return -1;
    int rc = serve_buf_add(&j->sse, "data: ", 6) || serve_buf_add(&j->sse, s, strlen(s)) || serve_buf_add(&j->sse, "\n\n", 2);
    free(s);
    return rc ? -1 : 0;
}

/* A chunk with one choice (index i); the choice object is returned to be filled. */
static cJSON *chunk(const serve_engine *e, const serve_job *j, int i, cJSON **root) {
    *root = base_object(e, j, 1);
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(*root, "choices"), c);
    cJSON_AddNumberToObject(c, "index", i);
    if (j->req.include_usage) cJSON_AddNullToObject(*root, "usage");
    return c;
}

int serve_sse_piece(const serve_engine *e, serve_job *j, int choice, const char *text, size_t len, int first, cJSON *logprobs) {
    cJSON *root, *c = chunk(e, j, choice, &root);
    if (j->req.kind == SERVE_CHAT) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (first) cJSON_AddStringToObject(d, "role", "assistant");
        add_text(d, "content", text, len);
    } else {
        add_text(c, "text", text, len);
    }
    if (logprobs) cJSON_AddItemToObject(c, "logprobs", logprobs);
    else cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddNullToObject(c, "finish_reason");
    return add_event(j, root);
}

int serve_sse_finish(const serve_engine *e, serve_job *j, int choice, const char *reason) {
    cJSON *root, *c = chunk(e, j, choice, &root);
    if (j->req.kind == SERVE_CHAT) cJSON_AddObjectToObject(c, "delta");
    else cJSON_AddStringToObject(c, "text", "");
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddStringToObject(c, "finish_reason", reason);
    return add_event(j, root);
}

int serve_sse_usage(const serve_engine *e, serve_job *j) {
    cJSON *root = base_object(e, j, 1);
    cJSON_AddArrayToObject(root, "choices");
    add_usage(root, j);
    return add_event(j, root);
}

int serve_sse_done(serve_job *j) {
    return serve_buf_add(&j->sse, "data: [DONE]\n\n", 14);
}

int serve_sse_error(serve_job *j, const char *message) {
    serve_error err = {0};
    serve_error_set(&err, 500, "server_error", NULL, "%s", message);
    char *s = serve_json_error(&err);
    if (!s) return -1;
    int rc = serve_buf_add(&j->sse, "data: ", 6) || serve_buf_add(&j->sse, s, strlen(s)) || serve_buf_add(&j->sse, "\n\n", 2);
    free(s);
    return rc ? -1 : 0;
}

char *serve_json_models(const serve_engine *e) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "data"), m);
    cJSON_AddStringToObject(m, "id", serve_model_id(e));
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "sonicboom");
    cJSON *meta = cJSON_AddObjectToObject(m, "meta");
    cJSON_AddStringToObject(meta, "arch", e->info.arch);
    cJSON_AddNumberToObject(meta, "n_vocab", (double)e->info.n_vocab);
    cJSON_AddNumberToObject(meta, "n_ctx_train", (double)e->info.n_ctx_train);
    cJSON_AddNumberToObject(meta, "n_ctx", (double)e->n_ctx);
    cJSON_AddNumberToObject(meta, "n_params", (double)e->info.n_params);
    cJSON_AddStringToObject(meta, "chat_format", sb_vocab_chat_format(e->vocab));
    return finish_json(root);
}
