/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/hostile/hostile_abi.c — drives the C ABI entry points that take outside data with inputs
 * given on the command line, for the hostile-input suite (run.py). Uses only include/sonicboom.h.
 *   hostile_abi OP ARGS...
 * On success exits 0; on a failing call prints the one line "error: <STATUS>: <sb_last_error()>"
 * on stderr and exits 1, exactly like sb; 2 for a bad command line of this program. So the suite
 * checks ABI cases with the same rules as CLI cases (status name and message in the one line).
 * Ops (PATH a file; NUM parsed with strtoll, so -1, huge and 0 reach the library as given):
 *   gguf PATH                 sb_gguf_open, then read every key, value and tensor
 *   gguf-mem PATH             the same through sb_gguf_open_memory on the file's bytes
 *   vocab PATH                sb_vocab_load, tokenize/detokenize a sample, every token's piece
 *   model PATH [check]        sb_model_load (check: check_tensors = 1), sb_model_get_info
 *   generate PATH N_CTX N_PREDICT PROMPT   model, session, greedy sampler, sb_generate
 *   session PATH N_CTX N_BATCH N_THREADS KV_TYPE DEVICE   sb_session_create with these params
 *   tokenize PATH TEXT ADD PARSE CAP      sb_tokenize into a CAP-id buffer (CAP 0: NULL buffer)
 *   detok PATH ID...          sb_detokenize the ids
 *   piece PATH ID             sb_token_to_piece and sb_token_get_text of one id
 *   stream PATH ID...         sb_detok_stream_push of each id, then flush
 *   prefill PATH N_CTX ID...  sb_session_prefill of the ids, then sb_session_decode of ID[0]
 *   eval PATH ID...           sb_session_eval_all of the ids
 *   decode-loop PATH SECONDS  decode token 1 over and over for SECONDS (the model file is cut meanwhile)
 *   sampler N_VOCAB TEMP TOPK TOPP MINP   sb_sampler_create + sample from N_VOCAB zero logits
 *   null OP                   call OP (gguf, vocab, model, tokenize, session) with NULL arguments
 */
#include "sonicboom.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <unistd.h>

static int fail(sb_status s) {
    fprintf(stderr, "error: %s: %s\n", sb_status_str(s), sb_last_error());
    return 1;
}

#define TRY(call)                        \
    do {                                 \
        sb_status st_ = (call);          \
        if (st_ != SB_OK) return fail(st_); \
    } while (0)

/* sb_model_load's contract: a mapped model file cut during an evaluation raises SIGBUS in the
 * caller, who loads with no_mmap or handles it; this program handles it as `sb` does. */
static int sigbus_taken; /* the first faulting thread reports; any other waits for its _exit */

static void on_sigbus(int sig) {
    (void)sig;
    if (__atomic_exchange_n(&sigbus_taken, 1, __ATOMIC_SEQ_CST))
        for (;;) pause(); /* two decode threads faulting at once print one line */
    static const char msg[] = "error: SB_ERR_IO: the model file was truncated or changed while in use (SIGBUS)\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(1);
    _exit(1);
}

static long long num(const char *s) { return strtoll(s, NULL, 10); }

static int op_gguf(sb_gguf *g) {
    sb_gguf_info info;
    TRY(sb_gguf_get_info(g, &info));
    for (int64_t i = 0; i < info.n_kv; i++) {
        const char *key;
        sb_gguf_type t, et;
        uint64_t count;
        TRY(sb_gguf_get_kv(g, i, &key, &t, &et, &count));
        uint64_t n = t == SB_GGUF_ARRAY ? count : 1;
        sb_gguf_type vt = t == SB_GGUF_ARRAY ? et : t;
        for (uint64_t j = 0; j < n && j < 64; j++) {
            const char *s;
            size_t len;
            int64_t iv;
            uint64_t uv;
            double dv;
            if (vt == SB_GGUF_STRING) TRY(sb_gguf_get_str(g, i, j, &s, &len));
            else if (vt == SB_GGUF_FLOAT32 || vt == SB_GGUF_FLOAT64) TRY(sb_gguf_get_float(g, i, j, &dv));
            else if (vt == SB_GGUF_INT8 || vt == SB_GGUF_INT16 || vt == SB_GGUF_INT32 || vt == SB_GGUF_INT64) TRY(sb_gguf_get_int(g, i, j, &iv));
            else TRY(sb_gguf_get_uint(g, i, j, &uv));
        }
    }
    for (int64_t i = 0; i < info.n_tensors; i++) {
        sb_gguf_tensor t;
        TRY(sb_gguf_get_tensor(g, i, &t));
    }
    sb_gguf_free(g);
    return 0;
}

static int op_vocab(const char *path) {
    sb_vocab *v = NULL;
    TRY(sb_vocab_load(path, &v));
    static const char sample[] = "Hello world <|im_start|> \xff\xfe \n\t 123";
    int32_t toks[256];
    size_t n = 0;
    char buf[4096];
    size_t len;
    sb_status s = sb_tokenize(v, sample, sizeof sample - 1, 1, 1, toks, 256, &n);
    if (s == SB_OK) s = sb_detokenize(v, toks, n, 0, buf, sizeof buf, &len);
    for (int32_t i = 0; s == SB_OK && i < sb_vocab_n_tokens(v); i++) {
        s = sb_token_to_piece(v, i, 1, buf, sizeof buf, &len);
        if (s == SB_ERR_BUFFER_TOO_SMALL) s = SB_OK; /* a huge token text: the size was reported */
    }
    if (s != SB_OK) {
        fail(s);
        sb_vocab_free(v);
        return 1;
    }
    sb_vocab_free(v);
    return 0;
}

static int greedy_generate(sb_model *m, sb_session_params *sp, long long n_predict, const char *prompt) {
    sb_session *s = NULL;
    sb_sampler *smp = NULL;
    sb_model_info mi;
    sb_status st = sb_model_get_info(m, &mi);
    if (st == SB_OK) st = sb_session_create(m, sp, &s);
    sb_sampler_params pp;
    sb_sampler_default_params(&pp);
    pp.temp = 0;
    if (st == SB_OK) st = sb_sampler_create(&pp, mi.n_vocab, &smp);
    sb_generate_params gp;
    sb_generate_default_params(&gp);
    gp.n_predict = n_predict;
    if (st == SB_OK) st = sb_generate(s, smp, prompt, strlen(prompt), &gp, NULL, NULL, NULL);
    sb_sampler_free(smp);
    sb_session_free(s);
    sb_model_free(m);
    return st == SB_OK ? 0 : fail(st);
}

static int with_session(const char *path, long long n_ctx, sb_model **m, sb_session **s) {
    TRY(sb_model_load(path, NULL, m));
    sb_session_params sp;
    sb_session_default_params(&sp);
    sp.n_ctx = n_ctx;
    sb_status st = sb_session_create(*m, &sp, s);
    if (st != SB_OK) {
        sb_model_free(*m);
        return fail(st);
    }
    return 0;
}

static int op_null(const char *what) {
    sb_status s = SB_OK;
    if (!strcmp(what, "gguf")) {
        sb_gguf *g = NULL;
        s = sb_gguf_open(NULL, &g);
    } else if (!strcmp(what, "vocab")) {
        sb_vocab *v = NULL;
        s = sb_vocab_load(NULL, &v);
    } else if (!strcmp(what, "model")) {
        sb_model *m = NULL;
        s = sb_model_load(NULL, NULL, &m);
    } else if (!strcmp(what, "model-out")) {
        s = sb_model_load("x.gguf", NULL, NULL);
    } else if (!strcmp(what, "tokenize")) {
        size_t n;
        s = sb_tokenize(NULL, "x", 1, 0, 0, NULL, 0, &n);
    } else if (!strcmp(what, "session")) {
        sb_session *ss = NULL;
        s = sb_session_create(NULL, NULL, &ss);
    } else if (!strcmp(what, "gguf-mem")) {
        sb_gguf *g = NULL;
        s = sb_gguf_open_memory(NULL, 100, &g);
    } else {
        return 2;
    }
    return s == SB_OK ? 0 : fail(s);
}

static int ids(int argc, char **argv, int from, int32_t *out) {
    int n = 0;
    for (int i = from; i < argc && n < 64; i++) out[n++] = (int32_t)num(argv[i]);
    return n;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: hostile_abi OP ARGS... (see the file's top comment)\n");
        return 2;
    }
    const char *op = argv[1], *path = argv[2];
    int32_t tok[64];
    if (!strcmp(op, "gguf")) {
        sb_gguf *g = NULL;
        TRY(sb_gguf_open(path, &g));
        return op_gguf(g);
    }
    if (!strcmp(op, "gguf-mem")) {
        FILE *f = fopen(path, "rb");
        if (!f) return 2;
        static char buf[64 << 20];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        sb_gguf *g = NULL;
        TRY(sb_gguf_open_memory(buf, n, &g));
        return op_gguf(g);
    }
    if (!strcmp(op, "vocab")) return op_vocab(path);
    if (!strcmp(op, "model")) {
        sb_model *m = NULL;
        sb_model_params mp;
        sb_model_default_params(&mp);
        mp.check_tensors = argc > 3 && !strcmp(argv[3], "check");
        TRY(sb_model_load(path, &mp, &m));
        sb_model_info mi;
        sb_status s = sb_model_get_info(m, &mi);
        sb_model_free(m);
        return s == SB_OK ? 0 : fail(s);
    }
    if (!strcmp(op, "generate") && argc == 6) {
        sb_model *m = NULL;
        TRY(sb_model_load(path, NULL, &m));
        sb_session_params sp;
        sb_session_default_params(&sp);
        sp.n_ctx = num(argv[3]);
        return greedy_generate(m, &sp, num(argv[4]), argv[5]);
    }
    if (!strcmp(op, "session") && argc == 8) {
        sb_model *m = NULL;
        TRY(sb_model_load(path, NULL, &m));
        sb_session_params sp;
        sb_session_default_params(&sp);
        sp.n_ctx = num(argv[3]);
        sp.n_batch = num(argv[4]);
        sp.n_threads = (int)num(argv[5]);
        sp.kv_type = (int)num(argv[6]);
        sp.device = (int)num(argv[7]);
        return greedy_generate(m, &sp, 2, "In the beginning");
    }
    if (!strcmp(op, "tokenize") && argc == 7) {
        sb_vocab *v = NULL;
        TRY(sb_vocab_load(path, &v));
        size_t cap = (size_t)num(argv[6]), n = 0;
        int32_t *buf = cap && cap < (1u << 20) ? (int32_t *)malloc(cap * sizeof *buf) : NULL;
        sb_status s = sb_tokenize(v, argv[3], strlen(argv[3]), (int)num(argv[4]), (int)num(argv[5]), buf, buf ? cap : 0, &n);
        free(buf);
        sb_vocab_free(v);
        return s == SB_OK ? 0 : fail(s);
    }
    if (!strcmp(op, "detok") || !strcmp(op, "stream") || !strcmp(op, "piece")) {
        sb_vocab *v = NULL;
        TRY(sb_vocab_load(path, &v));
        int n = ids(argc, argv, 3, tok);
        char buf[4096];
        size_t len = 0;
        sb_status s = SB_OK;
        if (!strcmp(op, "detok")) {
            s = sb_detokenize(v, tok, (size_t)n, SB_DETOK_UNPARSE_SPECIAL, buf, sizeof buf, &len);
        } else if (!strcmp(op, "piece")) {
            const char *t;
            s = sb_token_to_piece(v, n ? tok[0] : 0, 1, buf, sizeof buf, &len);
            if (s == SB_OK) s = sb_token_get_text(v, n ? tok[0] : 0, &t, &len);
        } else {
            sb_detok_stream *ds = NULL;
            s = sb_detok_stream_create(v, 1, &ds);
            for (int i = 0; s == SB_OK && i < n; i++) s = sb_detok_stream_push(ds, tok[i], buf, sizeof buf, &len);
            if (s == SB_OK) s = sb_detok_stream_flush(ds, buf, sizeof buf, &len);
            sb_detok_stream_free(ds);
        }
        sb_vocab_free(v);
        return s == SB_OK ? 0 : fail(s);
    }
    if ((!strcmp(op, "prefill") && argc >= 4) || !strcmp(op, "eval")) {
        sb_model *m = NULL;
        sb_session *s = NULL;
        int eval = !strcmp(op, "eval");
        if (with_session(path, eval ? 0 : num(argv[3]), &m, &s)) return 1;
        int n = ids(argc, argv, eval ? 3 : 4, tok);
        sb_status st;
        if (eval) {
            sb_model_info mi;
            sb_model_get_info(m, &mi);
            float *lg = (float *)malloc((size_t)(n ? n : 1) * (size_t)mi.n_vocab * sizeof *lg);
            st = lg ? sb_session_eval_all(s, tok, (size_t)n, lg) : SB_ERR_OOM;
            free(lg);
        } else {
            int64_t reused;
            st = sb_session_prefill(s, tok, (size_t)n, &reused);
            if (st == SB_OK) st = sb_session_decode(s, n ? tok[0] : 0);
        }
        sb_session_free(s);
        sb_model_free(m);
        return st == SB_OK ? 0 : fail(st);
    }
    if (!strcmp(op, "decode-loop") && argc == 4) {
        /* decode token 1 for SECONDS seconds (the suite truncates the file meanwhile) */
        signal(SIGBUS, on_sigbus);
        sb_model *m = NULL;
        sb_session *s = NULL;
        if (with_session(path, 256, &m, &s)) return 1;
        sb_status st = SB_OK;
        time_t end = time(NULL) + (time_t)num(argv[3]);
        for (int64_t i = 0; st == SB_OK && time(NULL) < end; i++) {
            if (i % 200 == 0) st = sb_session_truncate(s, 0);
            if (st == SB_OK) st = sb_session_decode(s, 1);
        }
        sb_session_free(s);
        sb_model_free(m);
        return st == SB_OK ? 0 : fail(st);
    }
    if (!strcmp(op, "sampler") && argc == 7) {
        sb_sampler_params p;
        sb_sampler_default_params(&p);
        long long nv = num(argv[2]);
        p.temp = strtof(argv[3], NULL);
        p.top_k = (int32_t)num(argv[4]);
        p.top_p = strtof(argv[5], NULL);
        p.min_p = strtof(argv[6], NULL);
        sb_sampler *smp = NULL;
        TRY(sb_sampler_create(&p, nv, &smp));
        float *lg = nv > 0 && nv < (1 << 24) ? (float *)calloc((size_t)nv, sizeof *lg) : NULL;
        int32_t t = -1;
        sb_status s = lg ? sb_sampler_sample(smp, lg, &t) : SB_OK;
        if (s == SB_OK && lg && (t < 0 || t >= nv)) {
            fprintf(stderr, "error: SB_ERR_INTERNAL: sampled token %d outside [0, %lld)\n", t, nv);
            s = SB_ERR_INTERNAL;
        } else if (s != SB_OK) fail(s);
        free(lg);
        sb_sampler_free(smp);
        return s == SB_OK ? 0 : 1;
    }
    if (!strcmp(op, "null")) return op_null(path);
    fprintf(stderr, "hostile_abi: unknown op or wrong argument count: %s\n", op);
    return 2;
}
