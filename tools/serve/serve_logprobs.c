/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/serve/serve_logprobs.c — the "logprobs" objects of `sb serve` replies, built from the
 * sampler's log (sb_sampler_get_logprob: log-softmax of the logits with the request's logit_bias,
 * before penalties, truncation and temperature). Chat: OpenAI's {"content": [...], "refusal": null}
 * with one entry per token (its text, raw bytes, logprob, top_logprobs alternatives). Completions:
 * the legacy parallel arrays {tokens, token_logprobs, top_logprobs, text_offset}. A token's text is
 * its piece with control tokens rendered (so an alternative "</s>" is visible), made valid UTF-8;
 * "bytes" keeps the exact bytes. End-of-generation tokens are not listed (they are not text).
 */
#include "serve.h"

#include "sb.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

cJSON *serve_logprobs_new(serve_kind kind) {
    cJSON *lp = cJSON_CreateObject();
    if (!lp) return NULL;
    if (kind == SERVE_CHAT) {
        cJSON_AddArrayToObject(lp, "content");
        cJSON_AddNullToObject(lp, "refusal");
    } else {
        cJSON_AddArrayToObject(lp, "tokens");
        cJSON_AddArrayToObject(lp, "token_logprobs");
        cJSON_AddArrayToObject(lp, "top_logprobs");
        cJSON_AddArrayToObject(lp, "text_offset");
    }
    return lp;
}

typedef struct piece {
    char raw[256];
    size_t n;
    char *text; /* valid UTF-8, malloc'd */
} piece;

static int piece_get(const serve_engine *e, int32_t token, piece *p) {
    if (sb_token_to_piece(e->vocab, token, 1, p->raw, sizeof p->raw, &p->n) != SB_OK) p->n = 0;
    int lossy = 0;
    p->text = sb_utf8_clean(p->raw, p->n, &lossy);
    return p->text ? 0 : -1;
}

/* {token, logprob, bytes} of a chat entry or alternative. */
static cJSON *chat_token(const piece *p, float logprob) {
    cJSON *o = cJSON_CreateObject(), *bytes = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "token", p->text);
    cJSON_AddNumberToObject(o, "logprob", logprob);
    for (size_t i = 0; i < p->n; i++) cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)p->raw[i]));
    cJSON_AddItemToObject(o, "bytes", bytes);
    return o;
}

/* One log entry into lp. 0, or -1 (OOM). */
static int add_entry(const serve_engine *e, serve_kind kind, const sb_token_logprob *chosen, const sb_token_logprob *top,
                     size_t n_top, int64_t *offset, cJSON *lp) {
    piece p;
    if (piece_get(e, chosen->token, &p)) return -1;
    int rc = 0;
    if (kind == SERVE_CHAT) {
        cJSON *entry = chat_token(&p, chosen->logprob), *alts = cJSON_AddArrayToObject(entry, "top_logprobs");
        for (size_t i = 0; i < n_top && !rc; i++) {
            piece q;
            if ((rc = piece_get(e, top[i].token, &q))) break;
            cJSON_AddItemToArray(alts, chat_token(&q, top[i].logprob));
            free(q.text);
        }
        cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(lp, "content"), entry);
    } else {
        cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(lp, "tokens"), cJSON_CreateString(p.text));
        cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(lp, "token_logprobs"), cJSON_CreateNumber(chosen->logprob));
        cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(lp, "text_offset"), cJSON_CreateNumber((double)*offset));
        cJSON *alts = cJSON_CreateObject();
        for (size_t i = 0; i < n_top && !rc; i++) {
            piece q;
            if ((rc = piece_get(e, top[i].token, &q))) break;
            /* two tokens with the same text: the more likely one (listed first) keeps the key */
            if (!cJSON_GetObjectItemCaseSensitive(alts, q.text)) cJSON_AddNumberToObject(alts, q.text, top[i].logprob);
            free(q.text);
        }
        cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(lp, "top_logprobs"), alts);
    }
    *offset += (int64_t)p.n;
    free(p.text);
    return rc;
}

int serve_logprobs_take(const serve_engine *e, serve_kind kind, const sb_sampler *smp, size_t *done, int64_t *offset, cJSON *lp) {
    size_t n = sb_sampler_n_logprobs(smp);
    for (; *done < n; (*done)++) {
        sb_token_logprob chosen, top[SB_MAX_TOP_LOGPROBS];
        size_t n_top = 0;
        if (sb_sampler_get_logprob(smp, *done, &chosen, top, SB_MAX_TOP_LOGPROBS, &n_top) != SB_OK) return -1;
        if (sb_token_is_eog(e->vocab, chosen.token)) continue;
        if (add_entry(e, kind, &chosen, top, n_top, offset, lp)) return -1;
    }
    return 0;
}
