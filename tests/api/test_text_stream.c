/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/api/test_text_stream.c — sb_text_stream: a hand-written greedy loop (prefill, sample, push,
 * decode) gives exactly sb_generate's text and stop reason, with and without a stop string taken
 * from the middle of the text; multi-byte characters split across byte tokens reach the callback
 * whole (from valid text); a stop string spanning tokens is held back, then dropped; an end-of-generation token adds
 * no text and ends the stream; held text comes out at the flush; every error path.
 */
#include "sonicboom.h"
#include "test.h"

typedef struct sink {
    char text[8192];
    size_t n;
    int pieces, bad_utf8, cancel_after;
} sink;

/* a complete, valid UTF-8 sequence? (no split characters reach the callback) */
static int utf8_ok(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        int k = s[i] < 0x80 ? 1 : (s[i] >> 5) == 6 ? 2 : (s[i] >> 4) == 14 ? 3 : (s[i] >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n) return 0;
        for (int j = 1; j < k; j++)
            if ((s[i + j] & 0xc0) != 0x80) return 0;
        i += (size_t)k;
    }
    return 1;
}

static int collect(void *user, const char *text, size_t len, int32_t token) {
    (void)token;
    sink *k = user;
    if (k->n + len < sizeof k->text) memcpy(k->text + k->n, text, len), k->n += len, k->text[k->n] = 0;
    k->bad_utf8 += !utf8_ok((const unsigned char *)text, len);
    k->pieces++;
    return k->cancel_after && k->pieces >= k->cancel_after;
}

static const int32_t PROMPT[] = {1, 42, 77, 100, 5, 9, 300, 12}; /* the test vocabulary has 512 tokens */
#define N_GEN 40

/* sb_generate, greedy, N_GEN tokens */
static sb_stop_reason generate(sb_model *m, const char *stop, sink *out, int64_t *n_gen) {
    sb_session *s = NULL;
    sb_sampler *smp = NULL;
    sb_sampler_params sp;
    sb_sampler_default_params(&sp);
    sp.temp = 0;
    CHECK(sb_session_create(m, NULL, &s) == SB_OK && sb_sampler_create(&sp, sb_vocab_n_tokens(sb_model_get_vocab(m)), &smp) == SB_OK);
    sb_generate_params gp;
    sb_generate_default_params(&gp);
    gp.n_predict = N_GEN;
    gp.stop = &stop;
    gp.n_stop = stop ? 1 : 0;
    sb_generate_result r = {0};
    CHECK(sb_generate_tokens(s, smp, PROMPT, sizeof PROMPT / sizeof *PROMPT, &gp, collect, out, &r) == SB_OK);
    sb_sampler_free(smp);
    sb_session_free(s);
    *n_gen = r.n_generated;
    return r.stop;
}

/* the same by hand with sb_text_stream */
static sb_stop_reason by_hand(sb_model *m, const char *stop, sink *out, int64_t *n_gen) {
    const sb_vocab *v = sb_model_get_vocab(m);
    sb_session *s = NULL;
    sb_text_stream *t = NULL;
    CHECK(sb_session_create(m, NULL, &s) == SB_OK && sb_text_stream_create(v, &stop, stop ? 1 : 0, &t) == SB_OK);
    CHECK(sb_session_prefill(s, PROMPT, sizeof PROMPT / sizeof *PROMPT, NULL) == SB_OK);
    sb_stop_reason why = SB_STOP_LENGTH;
    *n_gen = 0;
    for (int k = 0; k < N_GEN; k++) {
        const float *l;
        int64_t V;
        CHECK(sb_session_get_logits(s, &l, &V) == SB_OK);
        int32_t best = 0;
        for (int64_t i = 1; i < V; i++)
            if (l[i] > l[best]) best = (int32_t)i;
        ++*n_gen;
        int st = -1;
        CHECK(sb_text_stream_push(t, best, collect, out, &st) == SB_OK);
        if (st >= 0) {
            why = (sb_stop_reason)st;
            break;
        }
        if (k + 1 < N_GEN) CHECK(sb_session_decode(s, best) == SB_OK);
    }
    CHECK(sb_text_stream_flush(t, collect, out) == SB_OK);
    sb_text_stream_free(t);
    sb_session_free(s);
    return why;
}

static void test_equals_generate(void) {
    sb_model *m = NULL;
    if (sb_model_load(test_data_path("models/test-qwen2-q8_0.gguf"), NULL, &m) != SB_OK) {
        printf("SKIP: %s\n", sb_last_error());
        return;
    }
    sink a = {0}, b = {0};
    int64_t na, nb;
    sb_stop_reason ra = generate(m, NULL, &a, &na), rb = by_hand(m, NULL, &b, &nb);
    CHECKF(a.n == b.n && !memcmp(a.text, b.text, a.n), "no stop: \"%s\" vs \"%s\"", a.text, b.text);
    CHECKF(ra == rb && na == nb && a.bad_utf8 == b.bad_utf8, "stop %d/%d, %lld/%lld tokens, %d/%d pieces not UTF-8 (random weights may\n"
           "generate invalid bytes: they come out at the flush, the same for both)", ra, rb, (long long)na, (long long)nb, a.bad_utf8, b.bad_utf8);
    CHECKF(a.n >= 8, "%zu bytes of text", a.n);
    size_t at = a.n / 2; /* 3 bytes from the middle (whole characters): a stop the text reaches */
    while (at + 3 < a.n && !utf8_ok((const unsigned char *)a.text + at, 3)) at++;
    CHECK(at + 3 < a.n);
    if (at + 3 < a.n) {
        char stop[4] = {0};
        memcpy(stop, a.text + at, 3);
        sink c = {0}, d = {0};
        ra = generate(m, stop, &c, &na), rb = by_hand(m, stop, &d, &nb);
        CHECKF(c.n == d.n && !memcmp(c.text, d.text, c.n), "stop \"%s\": \"%s\" vs \"%s\"", stop, c.text, d.text);
        CHECK(ra == SB_STOP_STRING && rb == SB_STOP_STRING && na == nb && c.n <= at && !strstr(c.text, stop));
    }
    sb_model_free(m);
}

/* push the tokens of text one by one */
static int push_text(sb_text_stream *t, const sb_vocab *v, const char *text, sink *k, int *stop) {
    int32_t ids[256];
    size_t n = 0;
    CHECK(sb_tokenize(v, text, strlen(text), 0, 0, ids, 256, &n) == SB_OK);
    for (size_t i = 0; i < n; i++) {
        sb_status s = sb_text_stream_push(t, ids[i], collect, k, stop);
        if (s != SB_OK) return (int)s;
        if (*stop >= 0) return (int)(i + 1 == n ? 0 : 1000 + (int)i); /* ended early: which token */
    }
    return 0;
}

static void test_units(void) {
    sb_vocab *v = NULL;
    if (sb_vocab_load(test_data_path("models/test-qwen2-q8_0.gguf"), &v) != SB_OK) {
        printf("SKIP: %s\n", sb_last_error());
        return;
    }
    sb_text_stream *t = NULL;
    int stop = -1;
    /* multi-byte characters over byte tokens: only whole characters, the text intact */
    /* (no spaces: this small SentencePiece vocabulary spells a space before a byte token as the bytes
     * of U+2581, as llama.cpp does; its first piece keeps the dummy-prefix space) */
    const char *utf = "h\xc3\xa9llo\xf0\x9f\x8e\x89w\xc3\xb6rld\xe6\x97\xa5\xe6\x9c\xac";
    sink k = {0};
    CHECK(sb_text_stream_create(v, NULL, 0, &t) == SB_OK);
    CHECK(push_text(t, v, utf, &k, &stop) == 0 && stop == -1);
    CHECK(sb_text_stream_flush(t, collect, &k) == SB_OK);
    CHECKF(!strcmp(k.text + (k.text[0] == ' '), utf) && k.bad_utf8 == 0 && k.pieces > 1, "\"%s\"", k.text);
    sb_text_stream_free(t);
    /* a stop string across tokens: the text before it, nothing after, the stream ended (the
     * SentencePiece vocabulary gives "hello" a leading space: the expectation comes from the text
     * without stops) */
    sink full = {0};
    CHECK(sb_text_stream_create(v, NULL, 0, &t) == SB_OK);
    CHECK(push_text(t, v, "hello world say zz", &full, &stop) == 0 && sb_text_stream_flush(t, collect, &full) == SB_OK);
    sb_text_stream_free(t);
    const char *at = strstr(full.text, "lo wo");
    CHECK(at != NULL);
    const char *stops[] = {"lo wo", "zzz"};
    sink s = {0};
    CHECK(sb_text_stream_create(v, stops, 2, &t) == SB_OK);
    CHECK(push_text(t, v, "hello world", &s, &stop) >= 0 && stop == SB_STOP_STRING);
    CHECKF(at && s.n == (size_t)(at - full.text) && !memcmp(s.text, full.text, s.n), "\"%s\"", s.text);
    CHECK(sb_text_stream_push(t, 42, collect, &s, &stop) == SB_ERR_INVALID_ARG); /* after the end */
    size_t before = s.n;
    CHECK(sb_text_stream_flush(t, collect, &s) == SB_OK && s.n == before);
    sb_text_stream_free(t);
    /* held text (a stop's prefix) comes out at the flush, after an end-of-generation token too */
    sink h = {0};
    CHECK(sb_text_stream_create(v, stops + 1, 1, &t) == SB_OK);
    CHECK(push_text(t, v, "hello world say zz", &h, &stop) == 0 && stop == -1);
    CHECKF(h.n + 2 == full.n && !memcmp(h.text, full.text, h.n), "\"%s\" (\"zz\" held)", h.text);
    int32_t eos = sb_vocab_get_special(v, SB_SPECIAL_EOS);
    if (eos >= 0 && sb_token_is_eog(v, eos)) {
        CHECK(sb_text_stream_push(t, eos, collect, &h, &stop) == SB_OK && stop == SB_STOP_EOG);
        CHECK(h.n + 2 == full.n);
    }
    CHECK(sb_text_stream_flush(t, collect, &h) == SB_OK);
    CHECKF(!strcmp(h.text, full.text), "\"%s\"", h.text);
    sb_text_stream_free(t);
    /* the callback cancels */
    sink c = {.cancel_after = 1};
    CHECK(sb_text_stream_create(v, NULL, 0, &t) == SB_OK);
    CHECK(push_text(t, v, "one two three", &c, &stop) == (int)SB_ERR_CANCELLED);
    CHECK(sb_text_stream_push(t, -1, collect, &c, &stop) == SB_ERR_RANGE);
    CHECK(sb_text_stream_push(t, sb_vocab_n_tokens(v), collect, &c, &stop) == SB_ERR_RANGE);
    CHECK(sb_text_stream_push(NULL, 1, collect, &c, &stop) == SB_ERR_INVALID_ARG && sb_text_stream_push(t, 1, collect, &c, NULL) == SB_ERR_INVALID_ARG);
    sb_text_stream_free(t);
    /* bad stop lists */
    const char *empty[] = {""}, *null1[] = {NULL};
    const char *many[65];
    for (int i = 0; i < 65; i++) many[i] = "x";
    CHECK(sb_text_stream_create(v, empty, 1, &t) == SB_ERR_INVALID_ARG && !t);
    CHECK(sb_text_stream_create(v, null1, 1, &t) == SB_ERR_INVALID_ARG);
    CHECK(sb_text_stream_create(v, many, 65, &t) == SB_ERR_INVALID_ARG);
    CHECK(sb_text_stream_create(v, NULL, 1, &t) == SB_ERR_INVALID_ARG);
    CHECK(sb_text_stream_create(NULL, NULL, 0, &t) == SB_ERR_INVALID_ARG);
    CHECK(sb_text_stream_create(v, many, 64, &t) == SB_OK);
    sb_text_stream_free(t);
    sb_text_stream_free(NULL);
    sb_vocab_free(v);
}

int main(void) {
    test_units();
    test_equals_generate();
    return test_summary();
}
