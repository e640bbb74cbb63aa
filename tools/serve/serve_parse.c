/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/serve/serve_parse.c — request bodies of /v1/chat/completions and /v1/completions into a
 * serve_request: every field type-checked and bounded (serve.h's limits), the prompt tokenized (a
 * chat through sb_chat_tokenize, so message text can never forge turn structure) and checked
 * against the slot's context before anything is queued. logit_bias (at most SERVE_MAX_LOGIT_BIAS
 * entries {"token id": -100..100}, added to the logits) and logprobs (chat: logprobs true +
 * top_logprobs 0..20; completions: logprobs 0..20) are honoured. Fields this server cannot honour
 * (tools, response_format other than text, echo, suffix, best_of) are refused with a 400 naming
 * them, never silently ignored. Unknown fields are ignored, as OpenAI clients send
 * extras (user, metadata ...).
 */
#include "serve.h"

#include "llama_flags.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD_REQUEST "invalid_request_error"

int serve_error_set(serve_error *e, int status, const char *type, const char *param, const char *fmt, ...) {
    e->status = status;
    e->type = type;
    e->param = param;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return status;
}

/* 1 if the JSON text holds a \u0000 escape (cJSON would cut the string there: silent truncation). */
static int has_nul_escape(const char *s, size_t n) {
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i] != '\\') continue;
        if (s[i + 1] == 'u' && i + 5 < n && !memcmp(s + i + 2, "0000", 4)) return 1;
        i++; /* skip the escaped character */
    }
    return 0;
}

cJSON *serve_parse_body(const char *data, size_t len, serve_error *err) {
    if (!len) {
        serve_error_set(err, 400, BAD_REQUEST, NULL, "the request body is empty (expected a JSON object)");
        return NULL;
    }
    if (memchr(data, 0, len) || has_nul_escape(data, len)) {
        serve_error_set(err, 400, BAD_REQUEST, NULL, "the request body holds a NUL character");
        return NULL;
    }
    /* cJSON records the last parse error in a global: one parse at a time keeps that race-free */
    static pthread_mutex_t parse_lock = PTHREAD_MUTEX_INITIALIZER;
    const char *end = NULL;
    pthread_mutex_lock(&parse_lock);
    cJSON *root = cJSON_ParseWithLengthOpts(data, len, &end, 0);
    pthread_mutex_unlock(&parse_lock);
    if (!root) {
        size_t at = end && end >= data && end <= data + len ? (size_t)(end - data) : 0;
        serve_error_set(err, 400, BAD_REQUEST, NULL, "malformed JSON in the request body near byte %zu", at);
        return NULL;
    }
    for (const char *p = end; p && p < data + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') {
            serve_error_set(err, 400, BAD_REQUEST, NULL, "malformed JSON: bytes after the value at byte %zu", (size_t)(p - data));
            cJSON_Delete(root);
            return NULL;
        }
    if (!cJSON_IsObject(root)) {
        serve_error_set(err, 400, BAD_REQUEST, NULL, "the request body must be a JSON object");
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* The field `name` of o, or NULL when absent or JSON null (both mean "default"). */
static const cJSON *field(const cJSON *o, const char *name) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    return f && !cJSON_IsNull(f) ? f : NULL;
}

/* An integer field in [lo, hi]; absent: *out untouched. 0 or 400. */
static int get_int(const cJSON *o, const char *name, double lo, double hi, int64_t *out, serve_error *err) {
    const cJSON *f = field(o, name);
    if (!f) return 0;
    if (!cJSON_IsNumber(f) || f->valuedouble != floor(f->valuedouble))
        return serve_error_set(err, 400, BAD_REQUEST, name, "'%s' must be an integer", name);
    if (f->valuedouble < lo || f->valuedouble > hi)
        return serve_error_set(err, 400, BAD_REQUEST, name, "'%s' must be in [%.0f, %.0f], got %.17g", name, lo, hi, f->valuedouble);
    *out = (int64_t)f->valuedouble;
    return 0;
}

static int get_float(const cJSON *o, const char *name, double lo, double hi, float *out, serve_error *err) {
    const cJSON *f = field(o, name);
    if (!f) return 0;
    if (!cJSON_IsNumber(f)) return serve_error_set(err, 400, BAD_REQUEST, name, "'%s' must be a number", name);
    if (!(f->valuedouble >= lo && f->valuedouble <= hi))
        return serve_error_set(err, 400, BAD_REQUEST, name, "'%s' must be in [%g, %g], got %.17g", name, lo, hi, f->valuedouble);
    *out = (float)f->valuedouble;
    return 0;
}

static int get_bool(const cJSON *o, const char *name, int *out, serve_error *err) {
    const cJSON *f = field(o, name);
    if (!f) return 0;
    if (!cJSON_IsBool(f)) return serve_error_set(err, 400, BAD_REQUEST, name, "'%s' must be true or false", name);
    *out = cJSON_IsTrue(f);
    return 0;
}

static int unsupported(serve_error *err, const char *name, const char *what) {
    return serve_error_set(err, 400, BAD_REQUEST, name, "'%s' is not supported by this server (%s)", name, what);
}

/* Fields that ask for something this server does not do: refused, never silently ignored. */
static int refuse_unsupported(const cJSON *o, serve_error *err) {
    const cJSON *f;
    if ((f = field(o, "tools")) && !(cJSON_IsArray(f) && !f->child)) return unsupported(err, "tools", "no tool calls");
    if ((f = field(o, "response_format"))) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(f, "type");
        if (!cJSON_IsObject(f) || !cJSON_IsString(t) || strcmp(t->valuestring, "text"))
            return unsupported(err, "response_format", "only {\"type\": \"text\"}: no constrained output");
    }
    if ((f = field(o, "echo")) && !cJSON_IsFalse(f)) return unsupported(err, "echo", "the prompt is not echoed");
    if ((f = field(o, "suffix")) && !(cJSON_IsString(f) && !*f->valuestring))
        return unsupported(err, "suffix", "no fill-in-the-middle");
    if ((f = field(o, "best_of")) && !(cJSON_IsNumber(f) && f->valuedouble == 1))
        return unsupported(err, "best_of", "only 1");
    return 0;
}

static int parse_stops(const cJSON *o, serve_request *r, serve_error *err) {
    const cJSON *f = field(o, "stop");
    if (!f) return 0;
    if (!cJSON_IsString(f) && !cJSON_IsArray(f))
        return serve_error_set(err, 400, BAD_REQUEST, "stop", "'stop' must be a string or an array of strings");
    int n = cJSON_IsString(f) ? 1 : cJSON_GetArraySize(f);
    if (n > SERVE_MAX_STOP)
        return serve_error_set(err, 400, BAD_REQUEST, "stop", "'stop' has %d strings, at most %d are allowed", n, SERVE_MAX_STOP);
    for (int i = 0; i < n; i++) {
        const cJSON *s = cJSON_IsString(f) ? f : cJSON_GetArrayItem(f, i);
        if (!cJSON_IsString(s)) return serve_error_set(err, 400, BAD_REQUEST, "stop", "'stop[%d]' must be a string", i);
        size_t len = strlen(s->valuestring);
        if (len == 0 || len > SERVE_MAX_STOP_LEN)
            return serve_error_set(err, 400, BAD_REQUEST, "stop", "'stop[%d]' must be 1 to %d bytes, got %zu", i,
                                   SERVE_MAX_STOP_LEN, len);
        if (!(r->stops[r->n_stop] = strdup(s->valuestring))) return serve_error_set(err, 500, "server_error", NULL, "out of memory");
        r->n_stop++;
    }
    return 0;
}

/* logit_bias: {"token id": bias}, ids in [0, n_vocab) given once, bias in [-100, 100]. */
static int parse_logit_bias(const serve_engine *e, const cJSON *o, serve_request *r, serve_error *err) {
    const cJSON *f = field(o, "logit_bias");
    if (!f) return 0;
    if (!cJSON_IsObject(f))
        return serve_error_set(err, 400, BAD_REQUEST, "logit_bias", "'logit_bias' must be an object {\"token id\": bias}");
    int n = cJSON_GetArraySize(f);
    if (n > SERVE_MAX_LOGIT_BIAS)
        return serve_error_set(err, 400, BAD_REQUEST, "logit_bias", "'logit_bias' has %d entries, at most %d are allowed", n,
                               SERVE_MAX_LOGIT_BIAS);
    if (!n) return 0;
    r->bias_tok = malloc((size_t)n * sizeof *r->bias_tok);
    r->bias_val = malloc((size_t)n * sizeof *r->bias_val);
    if (!r->bias_tok || !r->bias_val) return serve_error_set(err, 500, "server_error", NULL, "out of memory");
    const cJSON *b;
    cJSON_ArrayForEach(b, f) {
        const char *k = b->string;
        char *end = NULL;
        long long id = k && *k >= '0' && *k <= '9' && strlen(k) <= 10 ? strtoll(k, &end, 10) : -1;
        if (id < 0 || !end || *end || id >= e->info.n_vocab)
            return serve_error_set(err, 400, BAD_REQUEST, "logit_bias", "'logit_bias' key '%.40s' must be a token id in [0, %lld)",
                                   k ? k : "", (long long)e->info.n_vocab);
        if (!cJSON_IsNumber(b) || !(b->valuedouble >= -100 && b->valuedouble <= 100))
            return serve_error_set(err, 400, BAD_REQUEST, "logit_bias", "'logit_bias[\"%lld\"]' must be a number in [-100, 100]", id);
        for (size_t i = 0; i < r->n_bias; i++)
            if (r->bias_tok[i] == id)
                return serve_error_set(err, 400, BAD_REQUEST, "logit_bias", "'logit_bias' gives token %lld twice", id);
        r->bias_tok[r->n_bias] = (int32_t)id;
        r->bias_val[r->n_bias++] = (float)b->valuedouble;
    }
    return 0;
}

/* Chat: logprobs true|false and top_logprobs 0..20 (only with logprobs true). Completions:
 * logprobs 0..20, the number of alternatives (0: the chosen token's only). */
static int parse_logprobs(const cJSON *o, serve_request *r, serve_error *err) {
    int64_t top = 0;
    if (r->kind == SERVE_COMPLETION) {
        int64_t lp = -1;
        int rc = get_int(o, "logprobs", 0, SB_MAX_TOP_LOGPROBS, &lp, err);
        r->logprobs = lp >= 0;
        r->top_logprobs = lp > 0 ? (int)lp : 0;
        return rc;
    }
    int rc = get_bool(o, "logprobs", &r->logprobs, err);
    if (!rc) rc = get_int(o, "top_logprobs", 0, SB_MAX_TOP_LOGPROBS, &top, err);
    if (!rc && field(o, "top_logprobs") && !r->logprobs)
        rc = serve_error_set(err, 400, BAD_REQUEST, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r->top_logprobs = (int)top;
    return rc;
}

static int parse_sampling(const cJSON *o, serve_request *r, serve_error *err) {
    sb_sampler_default_params(&r->sp);
    int64_t top_k = r->sp.top_k, seed = -1;
    int rc = get_float(o, "temperature", 0, 2, &r->sp.temp, err);
    if (!rc) rc = get_float(o, "top_p", 0, 1, &r->sp.top_p, err);
    if (!rc) rc = get_float(o, "min_p", 0, 1, &r->sp.min_p, err);
    if (!rc) rc = get_float(o, "presence_penalty", -2, 2, &r->sp.presence_penalty, err);
    if (!rc) rc = get_float(o, "frequency_penalty", -2, 2, &r->sp.frequency_penalty, err);
    if (!rc) rc = get_int(o, "top_k", 0, 1 << 30, &top_k, err);
    if (!rc) rc = get_int(o, "seed", -1, 9007199254740992.0, &seed, err);
    r->sp.top_k = (int32_t)top_k;
    r->sp.seed = seed < 0 ? random_seed() : (uint64_t)seed;
    return rc;
}

/* Common fields: n, stream, stream_options, stop, sampling, the unsupported ones. */
static int parse_common(const cJSON *o, serve_request *r, serve_error *err) {
    int64_t n = 1;
    const cJSON *model = field(o, "model");
    if (model && !cJSON_IsString(model)) return serve_error_set(err, 400, BAD_REQUEST, "model", "'model' must be a string");
    int rc = refuse_unsupported(o, err);
    if (!rc) rc = get_int(o, "n", 1, SERVE_MAX_N, &n, err);
    if (!rc) rc = get_bool(o, "stream", &r->stream, err);
    if (!rc) rc = get_bool(o, "ignore_eos", &r->ignore_eos, err);
    if (rc) return rc;
    r->n = (int)n;
    const cJSON *so = field(o, "stream_options");
    if (so) {
        if (!cJSON_IsObject(so))
            return serve_error_set(err, 400, BAD_REQUEST, "stream_options", "'stream_options' must be an object");
        if (!r->stream)
            return serve_error_set(err, 400, BAD_REQUEST, "stream_options", "'stream_options' is only allowed when 'stream' is true");
        if ((rc = get_bool(so, "include_usage", &r->include_usage, err))) return rc;
    }
    rc = parse_stops(o, r, err);
    if (!rc) rc = parse_logprobs(o, r, err);
    return rc ? rc : parse_sampling(o, r, err);
}

/* A message's content: a string, null (""), or an array of {"type":"text","text":...} parts,
 * joined. *out is malloc'd. */
static int message_content(const cJSON *c, int i, char **out, serve_error *err) {
    if (!c || cJSON_IsNull(c)) return (*out = strdup("")) ? 0 : serve_error_set(err, 500, "server_error", NULL, "out of memory");
    if (cJSON_IsString(c))
        return (*out = strdup(c->valuestring)) ? 0 : serve_error_set(err, 500, "server_error", NULL, "out of memory");
    if (!cJSON_IsArray(c))
        return serve_error_set(err, 400, BAD_REQUEST, "messages", "'messages[%d].content' must be a string or an array of text parts", i);
    serve_buf b = {0};
    serve_buf_add(&b, "", 0);
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "type"), *x = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(t) || strcmp(t->valuestring, "text") || !cJSON_IsString(x)) {
            free(b.data);
            return serve_error_set(err, 400, BAD_REQUEST, "messages",
                                   "'messages[%d].content' parts must be {\"type\": \"text\", \"text\": STRING} (no images or audio)", i);
        }
        if (serve_buf_add(&b, x->valuestring, strlen(x->valuestring))) {
            free(b.data);
            return serve_error_set(err, 500, "server_error", NULL, "out of memory");
        }
    }
    *out = b.data;
    return *out ? 0 : serve_error_set(err, 500, "server_error", NULL, "out of memory");
}

static const char *message_role(const cJSON *m, int i, serve_error *err) {
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (!cJSON_IsString(role)) {
        serve_error_set(err, 400, BAD_REQUEST, "messages", "'messages[%d].role' must be a string", i);
        return NULL;
    }
    const char *r = role->valuestring;
    if (!strcmp(r, "system") || !strcmp(r, "developer")) return "system";
    if (!strcmp(r, "user")) return "user";
    if (!strcmp(r, "assistant")) return "assistant";
    serve_error_set(err, 400, BAD_REQUEST, "messages", "'messages[%d].role' '%.40s': expected system, developer, user or assistant", i, r);
    return NULL;
}

/* Tokenize a chat through the library's chat format (content never matched as markers). */
static int chat_prompt(const serve_engine *e, const cJSON *o, serve_request *r, serve_error *err) {
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(o, "messages");
    if (!cJSON_IsArray(msgs)) return serve_error_set(err, 400, BAD_REQUEST, "messages", "'messages' must be an array of messages");
    int n = cJSON_GetArraySize(msgs);
    if (n < 1 || n > SERVE_MAX_MESSAGES)
        return serve_error_set(err, 400, BAD_REQUEST, "messages", "'messages' must hold 1 to %d messages, got %d", SERVE_MAX_MESSAGES, n);
    sb_chat_message *cm = calloc((size_t)n, sizeof *cm);
    char **texts = calloc((size_t)n, sizeof *texts);
    int rc = cm && texts ? 0 : serve_error_set(err, 500, "server_error", NULL, "out of memory");
    for (int i = 0; i < n && !rc; i++) {
        const cJSON *m = cJSON_GetArrayItem(msgs, i);
        if (!cJSON_IsObject(m)) {
            rc = serve_error_set(err, 400, BAD_REQUEST, "messages", "'messages[%d]' must be an object", i);
            break;
        }
        cm[i].role = message_role(m, i, err);
        if (!cm[i].role) rc = err->status;
        else rc = message_content(cJSON_GetObjectItemCaseSensitive(m, "content"), i, &texts[i], err);
        cm[i].content = texts[i];
    }
    size_t need = 0;
    sb_status st = SB_OK;
    if (!rc) st = sb_chat_tokenize(e->vocab, cm, (size_t)n, 1, NULL, 0, &need);
    if (!rc && st == SB_ERR_BUFFER_TOO_SMALL) {
        r->prompt = malloc((need + 1) * sizeof *r->prompt);
        st = r->prompt ? sb_chat_tokenize(e->vocab, cm, (size_t)n, 1, r->prompt, need, &r->n_prompt) : SB_ERR_OOM;
    }
    if (!rc && st != SB_OK)
        rc = serve_error_set(err, st == SB_ERR_OOM ? 500 : 400, BAD_REQUEST, "messages", "%s: %s", sb_status_str(st), sb_last_error());
    for (int i = 0; texts && i < n; i++) free(texts[i]);
    free(texts);
    free(cm);
    return rc;
}

/* A completion prompt: a string, an array of one string, or an array of token ids. */
static int completion_prompt(const serve_engine *e, const cJSON *o, serve_request *r, serve_error *err) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "prompt");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(p->child)) p = p->child;
    if (cJSON_IsString(p)) {
        size_t len = strlen(p->valuestring), need = 0;
        sb_status st = sb_tokenize(e->vocab, p->valuestring, len, 1, 0, NULL, 0, &need);
        if (st == SB_ERR_BUFFER_TOO_SMALL || st == SB_OK) {
            r->prompt = malloc((need + 1) * sizeof *r->prompt);
            st = r->prompt ? sb_tokenize(e->vocab, p->valuestring, len, 1, 0, r->prompt, need, &r->n_prompt) : SB_ERR_OOM;
        }
        if (st != SB_OK) return serve_error_set(err, 400, BAD_REQUEST, "prompt", "%s: %s", sb_status_str(st), sb_last_error());
        return 0;
    }
    if (!cJSON_IsArray(p))
        return serve_error_set(err, 400, BAD_REQUEST, "prompt", "'prompt' must be a string, an array of one string, or an array of token ids");
    int n = cJSON_GetArraySize(p);
    r->prompt = malloc(((size_t)n + 1) * sizeof *r->prompt);
    if (!r->prompt) return serve_error_set(err, 500, "server_error", NULL, "out of memory");
    const cJSON *t;
    cJSON_ArrayForEach(t, p) {
        if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 ||
            t->valuedouble >= (double)e->info.n_vocab)
            return serve_error_set(err, 400, BAD_REQUEST, "prompt",
                                   "'prompt[%zu]' must be a token id in [0, %lld) (one prompt per request)", r->n_prompt,
                                   (long long)e->info.n_vocab);
        r->prompt[r->n_prompt++] = (int32_t)t->valuedouble;
    }
    return 0;
}

/* max_tokens against the context: the prompt and the tokens asked for must fit one slot. */
static int check_context(const serve_engine *e, const cJSON *o, serve_request *r, serve_error *err) {
    int64_t ctx = e->n_ctx, asked = -1;
    const char *name = field(o, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    int rc = get_int(o, name, 1, 1 << 30, &asked, err);
    if (rc) return rc;
    if (r->n_prompt == 0) return serve_error_set(err, 400, BAD_REQUEST, "prompt", "the prompt is empty (no tokens)");
    if ((int64_t)r->n_prompt >= ctx || (asked > 0 && (int64_t)r->n_prompt + asked > ctx))
        return serve_error_set(err, 400, "exceed_context_size_error", asked > 0 ? name : NULL,
                               "the request needs %zu prompt tokens + %lld new tokens, more than the context of %lld tokens",
                               r->n_prompt, (long long)(asked > 0 ? asked : 1), (long long)ctx);
    int64_t room = ctx - (int64_t)r->n_prompt;
    r->max_tokens = asked > 0 ? asked : r->kind == SERVE_COMPLETION && room > 16 ? 16 : room;
    return 0;
}

int serve_parse_request(const serve_engine *e, const cJSON *o, serve_kind kind, serve_request *r, serve_error *err) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    int rc = parse_common(o, r, err);
    if (!rc) rc = parse_logit_bias(e, o, r, err);
    if (!rc) rc = kind == SERVE_CHAT ? chat_prompt(e, o, r, err) : completion_prompt(e, o, r, err);
    if (!rc) rc = check_context(e, o, r, err);
    if (rc) serve_request_free(r);
    return rc;
}
