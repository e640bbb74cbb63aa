/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_tok_robust.c — robustness on the real shared vocabularies (robustness.md §4b
 * K2/K3/K6): all 256 single bytes and all 65536 two-byte strings, every code point
 * 0..0x10FFFF, every token's piece re-tokenizing to the same text, NUL bytes, long and repetitive
 * inputs with a linear-time check (1 MB vs 4 MB), and a length over INT32_MAX rejected up front.
 * Defined behaviour checked: ids always in [0, n_vocab); round trip exact for SPM/Gemma 4 on any
 * bytes (a literal U+2581 comes back as a space), and for byte-level BPE exact after invalid
 * bytes became U+FFFD (docs/tokenizer.md).
 * Argument: vocab names to run (default qwen2 llama-spm gemma-4).
 */
#include "test.h"

#include "format/gguf.h"
#include "runtime/tokenizer/tok_internal.h"

#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Text of at least len bytes (at most len + 2) from the 16 parts picked at random; returns its length. */
static size_t random_text(char *t, size_t len, const char *const parts[16], uint64_t *seed) {
    size_t n = 0;
    while (n < len) {
        const char *p = parts[test_rand_u64(seed) % 16];
        memcpy(t + n, p, strlen(p));
        n += strlen(p);
    }
    return n;
}

/* 1 when t tokenizes differently with merge runs and the word cache (the default) than with the
 * plain loops (no_runs: the reference); ids and ref are scratch. */
static int runs_differ(tok_vocab *v, const char *t, size_t n, tok_ids *ids, tok_ids *ref) {
    ids->n = ref->n = 0;
    tok_vocab_set_no_runs(v, true);
    CHECK(tok_tokenize(v, t, n, false, false, ref) == SB_OK);
    tok_vocab_set_no_runs(v, false);
    CHECK(tok_tokenize(v, t, n, false, false, ids) == SB_OK);
    return ids->n != ref->n || memcmp(ids->ids, ref->ids, ids->n * sizeof *ids->ids);
}

/* What the round trip must give back: the text itself, or for BPE the U+FFFD-sanitised text. */
static size_t expected(const tok_vocab *v, const char *t, size_t n, char *out) {
    if (tok_get_model(v) != TOK_MODEL_BPE) { /* a literal U+2581 comes back as the space it stands for */
        size_t o = 0;
        for (size_t i = 0; i < n;) {
            if (i + 3 <= n && !memcmp(t + i, "\xE2\x96\x81", 3)) { out[o++] = ' '; i += 3; }
            else out[o++] = t[i++];
        }
        return o;
    }
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t l = tok_utf8_decode((const unsigned char *)t + i, n - i, &cp);
        if (l) { memcpy(out + o, t + i, l); o += l; i += l; }
        else { memcpy(out + o, "\xEF\xBF\xBD", 3); o += 3; i++; }
    }
    return o;
}

static int fails_shown;

/* Tokenize, check ids, detokenize, compare; returns true when all is well. */
static bool round_trip(const tok_vocab *v, const char *t, size_t n, tok_ids *ids, tok_bytes *b, char *want) {
    ids->n = 0;
    b->n = 0;
    if (tok_tokenize(v, t, n, false, false, ids) != SB_OK) return false;
    for (size_t i = 0; i < ids->n; i++)
        if (ids->ids[i] < 0 || ids->ids[i] >= tok_n_tokens(v)) return false;
    if (tok_detokenize(v, ids->ids, ids->n, TOK_DETOK_NO_CLEAN_SPACES, b) != SB_OK) return false;
    size_t wn = expected(v, t, n, want);
    bool ok = b->n == wn && (!wn || !memcmp(b->p, want, wn));
    if (!ok && fails_shown++ < 5) {
        fprintf(stderr, "  round trip of %zu bytes:", n);
        for (size_t i = 0; i < n && i < 16; i++) fprintf(stderr, " %02x", (unsigned char)t[i]);
        fprintf(stderr, " -> %zu bytes:", b->n);
        for (size_t i = 0; i < b->n && i < 16; i++) fprintf(stderr, " %02x", (unsigned char)b->p[i]);
        fprintf(stderr, "\n");
    }
    return ok;
}

static void run(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", name);
    gguf_file f = {0};
    if (gguf_open(test_data_path(rel), &f) != SB_OK) {
        printf("SKIP %s: shared test data absent (%s)\n", name, sb_last_error());
        return;
    }
    tok_vocab *v = NULL;
    sb_status st = tok_vocab_load_gguf(&f, &v);
    gguf_close(&f);
    CHECKF(st == SB_OK, "%s: %s", name, sb_last_error());
    if (!v) return;
    tok_ids ids = {0};
    tok_bytes b = {0};
    char *want = malloc(64 << 20);
    fails_shown = 0;
    uint64_t seed = 42;
    double t0 = now();

    // all single bytes and all byte pairs
    int bad = 0;
    for (int x = 0; x < 256; x++) {
        char s[2] = {(char)x};
        bad += !round_trip(v, s, 1, &ids, &b, want);
        for (int y = 0; y < 256; y++) {
            s[1] = (char)y;
            bad += !round_trip(v, s, 2, &ids, &b, want);
        }
    }
    CHECKF(bad == 0, "%s: %d of 65792 one/two-byte strings failed", name, bad);
    double t1 = now();

    // every code point, 1024 per text (surrogates are not encodable: skipped)
    bad = 0;
    char *text = malloc(8192);
    for (uint32_t cp = 0; cp <= 0x10FFFF;) {
        size_t n = 0;
        for (int k = 0; k < 1024 && cp <= 0x10FFFF; k++, cp++) {
            if (cp >= 0xD800 && cp <= 0xDFFF) continue;
            n += tok_utf8_encode(cp, (unsigned char *)text + n);
        }
        bad += !round_trip(v, text, n, &ids, &b, want);
    }
    CHECKF(bad == 0, "%s: %d code-point blocks failed the round trip", name, bad);
    free(text);
    double t2 = now();

    // every normal token's piece re-tokenizes to the same text
    bad = 0;
    for (int32_t id = 0; id < tok_n_tokens(v); id++) {
        if (!(tok_attr(v, id) & TOK_ATTR_NORMAL)) continue;
        sb_strview p;
        if (tok_piece(v, id, false, &p) != SB_OK) { bad++; continue; }
        bad += !round_trip(v, p.ptr, p.len, &ids, &b, want);
    }
    CHECKF(bad == 0, "%s: %d token pieces do not re-tokenize stably", name, bad);
    double t3 = now();

    // SPM / Gemma 4 cut text into merge runs before U+2581, and long texts use a word cache:
    // both must give exactly what the plain loops give
    {
        static const char *const parts[] = {" ", "  ", "a", ">", "</", "\xE2\x96\x81", "the", "\n",
                                            "\xC3\xA9", "\xff", "<", "b", "ing", ".", "\t", "0"};
        char *rt = malloc(4096);
        tok_ids ref = {0};
        int diff = 0;
        for (int it = 0; it < 3000; it++) {
            size_t len = 1 + test_rand_u64(&seed) % 200;
            diff += runs_differ(v, rt, random_text(rt, len, parts, &seed), &ids, &ref);
        }
        CHECKF(diff == 0, "%s: %d of 3000 random texts differ between cut and uncut merge loops", name, diff);
        /* long random texts (the cache is on from 16 KiB) */
        char *lt = malloc(70000);
        diff = 0;
        for (int it = 0; it < 4; it++) diff += runs_differ(v, lt, random_text(lt, 65536, parts, &seed), &ids, &ref);
        CHECKF(diff == 0, "%s: %d of 4 long random texts differ from the reference (cache / runs)", name, diff);
        free(lt);
        tok_ids_free(&ref);
        free(rt);
    }

    // long inputs: English-like text, 1 MB and 4 MB; time must grow about linearly
    static const char *words[] = {"the ", "quick ", "brown ", "fox, ", "jumps ", "over ", "lazy ", "dogs. ",
                                  "It's ", "2024\n", "and ", "we're ", "testing ", "tokenizers! ", "(really) ", "\n\n"};
    size_t big = 4u << 20;
    char *eng = malloc(big);
    for (size_t n = 0; n < big;) {
        const char *w = words[test_rand_u64(&seed) % 16];
        size_t l = strlen(w);
        if (n + l > big) l = big - n;
        memcpy(eng + n, w, l);
        n += l;
    }
    /* best of 3 per size, so a busy machine (CI, sanitizers) does not fake a non-linear curve;
     * linear is 4x, quadratic 16x */
    double best1 = 1e30, best4 = 1e30, a0, a1, a2;
    for (int rep = 0; rep < 3; rep++) {
        a0 = now();
        CHECK(round_trip(v, eng, big / 4, &ids, &b, want));
        a1 = now();
        CHECK(round_trip(v, eng, big, &ids, &b, want));
        a2 = now();
        if (a1 - a0 < best1) best1 = a1 - a0;
        if (a2 - a1 < best4) best4 = a2 - a1;
    }
    double r = best4 / (best1 + 1e-9);
    CHECKF(r < 8.0, "%s: 4 MB took %.2fx the time of 1 MB (%.3f s vs %.3f s, best of 3)", name, r, best4, best1);
    // repetitive inputs and NUL bytes
    const char reps[] = {'a', ' ', '\n', '\0', '9'};
    double worst = 0;
    for (size_t k = 0; k < sizeof reps; k++) {
        memset(eng, reps[k], 1u << 19);
        double r0 = now();
        CHECKF(round_trip(v, eng, 1u << 19, &ids, &b, want), "%s: 512 KB of byte 0x%02x", name, reps[k]);
        double dt = now() - r0;
        if (dt > worst) worst = dt;
    }
    CHECKF(worst < 10.0, "%s: a repetitive 512 KB input took %.1f s", name, worst);
    free(eng);
    double t4 = now();
    ids.n = 0;
    CHECK(tok_tokenize(v, "x", (size_t)INT32_MAX + 1, false, false, &ids) == SB_ERR_TEXT_TOO_LONG && ids.n == 0);
    printf("%-9s bytes %.2fs, code points %.2fs, %d pieces %.2fs, long %.2fs (English %.1f MB/s)\n", name, t1 - t0,
           t2 - t1, tok_n_tokens(v), t3 - t2, t4 - t3, 4.0 / (a2 - a1));
    free(want);
    tok_ids_free(&ids);
    tok_bytes_free(&b);
    tok_vocab_free(v);
}

int main(int argc, char **argv) {
    if (argc > 1) {
        for (int i = 1; i < argc; i++) run(argv[i]);
    } else {
        run("qwen2");
        run("llama-spm");
        run("gemma-4");
    }
    return test_summary();
}
