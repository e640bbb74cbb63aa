/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/bench_output.c — `sb bench`'s printers, llama-bench's five formats (bench.h):
 *   csv    the field names, then one line a test, every value in double quotes ("" inside: RFC 4180)
 *   json   an array of objects, jsonl one object a line: the fields in order, then samples_ns and
 *          samples_ts; built with cJSON, so any path or metadata gives valid JSON (text is first made
 *          valid UTF-8: an invalid byte becomes U+FFFD)
 *   sql    CREATE TABLE IF NOT EXISTS llama_bench (...) and one INSERT a test, every value a string
 *          literal with ' doubled
 *   md     llama-bench's table (model, size, params, backend, the parameters that are not default,
 *          test, t/s) plus ours: GB/s (weights read per second by a tg test) and % of bw (of the
 *          read bandwidth named under the table). Text is made terminal-safe.
 * The machine-readable formats carry exactly the fields of llama-bench at llama.cpp de3ff81 (the
 * version ../shared/anchor holds) in its order and types, and nothing else, so their output merges
 * with llama-bench's; GB/s and % of bw are in md only.
 */
#include "bench.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---- text ----

/* Length of the valid UTF-8 sequence at s (1..4), 0 if s starts an invalid one. */
static int utf8_len(const unsigned char *s) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
    if (n == 0 || (n == 3 && c > 0xEF)) return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (n == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F))) return 0; /* overlong, surrogate */
    if (n == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] > 0x8F))) return 0; /* overlong, > U+10FFFF */
    return n;
}

char *bench_clean_text(const char *s, int terminal_safe) {
    size_t n = strlen(s);
    char *out = (char *)malloc(3 * n + 1), *o = out;
    if (!out) return NULL;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int k = utf8_len(p);
        if (k == 0) {
            memcpy(o, "\xEF\xBF\xBD", 3); /* U+FFFD */
            o += 3;
            p++;
        } else if (terminal_safe && (*p < 0x20 || *p == 0x7F || (k == 2 && p[0] == 0xC2 && p[1] < 0xA0))) {
            *o++ = '?'; /* C0, DEL, C1 (U+0080..U+009F) */
            p += k;
        } else if (terminal_safe && *p == '|') {
            *o++ = '\\';
            *o++ = '|';
            p++;
        } else {
            memcpy(o, p, (size_t)k);
            o += k;
            p += k;
        }
    }
    *o = 0;
    return out;
}

int bench_format_parse(const char *s, bench_format *out) {
    static const char *const names[] = {"none", "md", "csv", "json", "jsonl", "sql"};
    for (int i = 0; i < 6; i++)
        if (!strcmp(s, names[i])) {
            *out = (bench_format)i;
            return 0;
        }
    return -1;
}

void bench_test_name(const bench_row *r, char *buf, size_t cap) {
    int n;
    if (r->n_gen == 0) n = snprintf(buf, cap, "pp%lld", (long long)r->n_prompt);
    else if (r->n_prompt == 0) n = snprintf(buf, cap, "tg%lld", (long long)r->n_gen);
    else n = snprintf(buf, cap, "pp%lld+tg%lld", (long long)r->n_prompt, (long long)r->n_gen);
    if (r->n_depth > 0 && n > 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, " @ d%lld", (long long)r->n_depth);
}

// ---- the field set ----

typedef enum { K_STR, K_BOOL, K_INT, K_FLOAT } kind;

typedef struct field {
    const char *name;
    kind k;
    const char *s; /* K_STR */
    double v;      /* the others */
} field;

enum { N_FIELDS = 41 };

typedef struct stats {
    double avg_ns, std_ns, avg_ts, std_ts;
} stats;

/* mean and sample standard deviation (n - 1), as llama-bench: ns are whole nanoseconds */
static stats row_stats(const bench_row *r) {
    stats st = {0, 0, 0, 0};
    double s = 0, s2 = 0, t = 0, t2 = 0, tokens = (double)(r->n_prompt + r->n_gen);
    for (int i = 0; i < r->n_samples; i++) {
        double ns = floor(r->samples_s[i] * 1e9 + 0.5), ts = tokens * 1e9 / ns;
        s += ns, s2 += ns * ns, t += ts, t2 += ts * ts;
    }
    int n = r->n_samples;
    if (n == 0) return st;
    st.avg_ns = floor(s / n), st.avg_ts = t / n;
    if (n > 1) {
        st.std_ns = floor(sqrt(fmax(0, (s2 - s * s / n) / (n - 1))));
        st.std_ts = sqrt(fmax(0, (t2 - t * t / n) / (n - 1)));
    }
    return st;
}

/* llama-bench's fields of r in its order; strings not yet cleaned. */
static void fill_fields(const bench_printer *p, const bench_row *r, const stats *st, field *f) {
    const bench_machine *m = p->machine;
    int i = 0;
#define S(n, x) f[i++] = (field){n, K_STR, (x), 0}
#define B(n, x) f[i++] = (field){n, K_BOOL, NULL, (double)(x)}
#define I(n, x) f[i++] = (field){n, K_INT, NULL, (double)(x)}
#define F(n, x) f[i++] = (field){n, K_FLOAT, NULL, (x)}
    S("build_commit", m->build_commit);
    I("build_number", m->build_number);
    S("cpu_info", m->cpu_info);
    S("gpu_info", m->gpu_info);
    S("backends", r->backend);
    S("model_filename", r->model->filename);
    S("model_type", r->model->type);
    I("model_size", r->model->size);
    I("model_n_params", r->model->n_params);
    I("n_batch", r->n_batch);
    I("n_ubatch", r->n_ubatch);
    I("n_threads", r->n_threads);
    S("cpu_mask", "0x0");
    B("cpu_strict", 0);
    I("poll", 50);
    S("type_k", r->type_k);
    S("type_v", r->type_v);
    I("n_gpu_layers", r->n_gpu_layers);
    I("n_cpu_moe", 0);
    S("split_mode", "layer");
    I("main_gpu", 0);
    B("no_kv_offload", 0);
    I("flash_attn", 1); /* llama_flash_attn_type: enabled; every attention here is flash attention */
    S("devices", "auto");
    S("tensor_split", "0.00");
    S("tensor_buft_overrides", "none");
    S("load_mode", r->load_mode ? r->load_mode : "mmap");
    S("lazy_mode", "auto");
    B("embeddings", 0);
    I("no_op_offload", 0);
    B("no_host", 0);
    I("fit_target", 0);
    I("fit_min_ctx", 0);
    I("n_prompt", r->n_prompt);
    I("n_gen", r->n_gen);
    I("n_depth", r->n_depth);
    S("test_time", r->test_time);
    I("avg_ns", st->avg_ns);
    I("stddev_ns", st->std_ns);
    F("avg_ts", st->avg_ts);
    F("stddev_ts", st->std_ts);
#undef S
#undef B
#undef I
#undef F
}

/* The field names, in order (the csv header and the sql columns). */
static void field_names(field *f) {
    static const bench_model_desc md0 = {"", "", 0, 0, 0};
    static const bench_machine m0 = {"", 0, "", "", 0};
    const bench_row r0 = {.model = &md0, .backend = "", .type_k = "", .type_v = "", .load_mode = "mmap"};
    const bench_printer p0 = {BENCH_OUT_NONE, NULL, &m0, {0, 0, 0, 0, 0, 0}, 0};
    const stats st = {0, 0, 0, 0};
    fill_fields(&p0, &r0, &st, f);
}

/* A field's value as llama-bench's std::to_string writes it (csv, sql). */
static void value_text(const field *f, char *buf, size_t cap) {
    if (f->k == K_FLOAT) snprintf(buf, cap, "%f", f->v);
    else snprintf(buf, cap, "%lld", (long long)f->v);
}

// ---- csv, sql ----

static void put_quoted(FILE *out, const char *s, char q) {
    fputc(q, out);
    for (; *s; s++) {
        if (*s == q) fputc(q, out);
        fputc(*s, out);
    }
    fputc(q, out);
}

static sb_status print_delimited(bench_printer *p, const field *f) {
    char num[64];
    if (p->format == BENCH_OUT_SQL) {
        fprintf(p->f, "INSERT INTO llama_bench (");
        for (int i = 0; i < N_FIELDS; i++) fprintf(p->f, i ? ", %s" : "%s", f[i].name);
        fprintf(p->f, ") VALUES (");
    }
    const char q = p->format == BENCH_OUT_SQL ? '\'' : '"';
    for (int i = 0; i < N_FIELDS; i++) {
        if (i) fputs(p->format == BENCH_OUT_SQL ? ", " : ",", p->f);
        if (f[i].k == K_STR) {
            char *clean = bench_clean_text(f[i].s, 0);
            if (!clean) return SB_ERR_OOM;
            put_quoted(p->f, clean, q);
            free(clean);
        } else {
            value_text(&f[i], num, sizeof num);
            put_quoted(p->f, num, q);
        }
    }
    fputs(p->format == BENCH_OUT_SQL ? ");\n" : "\n", p->f);
    return SB_OK;
}

// ---- json, jsonl ----

static cJSON *row_json(const bench_row *r, const field *f) {
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL;
    for (int i = 0; ok && i < N_FIELDS; i++) {
        if (f[i].k == K_STR) {
            char *clean = bench_clean_text(f[i].s, 0);
            ok = clean && cJSON_AddStringToObject(o, f[i].name, clean);
            free(clean);
        } else if (f[i].k == K_BOOL) {
            ok = cJSON_AddBoolToObject(o, f[i].name, f[i].v != 0) != NULL;
        } else {
            ok = cJSON_AddNumberToObject(o, f[i].name, f[i].v) != NULL;
        }
    }
    cJSON *ns = ok ? cJSON_AddArrayToObject(o, "samples_ns") : NULL;
    cJSON *ts = ns ? cJSON_AddArrayToObject(o, "samples_ts") : NULL;
    ok = ts != NULL;
    for (int i = 0; ok && i < r->n_samples; i++) {
        double v = floor(r->samples_s[i] * 1e9 + 0.5);
        ok = cJSON_AddItemToArray(ns, cJSON_CreateNumber(v)) &&
             cJSON_AddItemToArray(ts, cJSON_CreateNumber((double)(r->n_prompt + r->n_gen) * 1e9 / v));
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static sb_status print_json(bench_printer *p, const bench_row *r, const field *f) {
    cJSON *o = row_json(r, f);
    char *text = o ? (p->format == BENCH_OUT_JSON ? cJSON_Print(o) : cJSON_PrintUnformatted(o)) : NULL;
    cJSON_Delete(o);
    if (!text) return SB_ERR_OOM;
    if (p->format == BENCH_OUT_JSON) fprintf(p->f, "%s%s", p->n_rows ? ",\n" : "", text);
    else fprintf(p->f, "%s\n", text);
    cJSON_free(text);
    return SB_OK;
}

// ---- md ----

typedef struct md_col {
    const char *title;
    int width; /* llama-bench's: negative = left-aligned */
} md_col;

/* The md columns of this printer, in order; returns their count. */
static int md_columns(const bench_printer *p, md_col *c) {
    int n = 0;
    c[n++] = (md_col){"model", -30};
    c[n++] = (md_col){"size", 10};
    c[n++] = (md_col){"params", 10};
    c[n++] = (md_col){"backend", -10};
    if (p->md.ngl) c[n++] = (md_col){"ngl", 3};
    if (p->md.threads) c[n++] = (md_col){"threads", 7};
    if (p->md.n_batch) c[n++] = (md_col){"n_batch", 7};
    if (p->md.n_ubatch) c[n++] = (md_col){"n_ubatch", 8};
    if (p->md.type_kv) c[n++] = (md_col){"type_k", 6};
    if (p->md.type_kv) c[n++] = (md_col){"type_v", 6};
    if (p->md.flash_attn) c[n++] = (md_col){"fa", 3};
    c[n++] = (md_col){"test", 15};
    c[n++] = (md_col){"t/s", 20};
    c[n++] = (md_col){"GB/s", 8};
    c[n++] = (md_col){"% of bw", 8};
    return n;
}

static void md_header(bench_printer *p) {
    md_col c[16];
    int n = md_columns(p, c);
    fprintf(p->f, "|");
    for (int i = 0; i < n; i++) fprintf(p->f, " %*s |", c[i].width, c[i].title);
    fprintf(p->f, "\n|");
    for (int i = 0; i < n; i++) {
        int w = abs(c[i].width);
        fputc(' ', p->f);
        for (int k = 0; k < w - 1; k++) fputc('-', p->f);
        fprintf(p->f, "%s |", c[i].width > 0 ? ":" : "-");
    }
    fprintf(p->f, "\n");
}

static sb_status md_row(bench_printer *p, const bench_row *r, const stats *st) {
    md_col c[16];
    int n = md_columns(p, c);
    char *model = bench_clean_text(r->model->type, 1);
    if (!model) return SB_ERR_OOM;
    fprintf(p->f, "|");
    for (int i = 0; i < n; i++) {
        char v[96];
        const char *t = c[i].title;
        const char *s = v;
        int w = c[i].width;
        uint64_t sz = r->model->size, np = r->model->n_params;
        if (!strcmp(t, "model")) s = model;
        else if (!strcmp(t, "size"))
            snprintf(v, sizeof v, sz < (1ull << 30) ? "%.2f MiB" : "%.2f GiB", (double)sz / (sz < (1ull << 30) ? 1048576.0 : 1073741824.0));
        else if (!strcmp(t, "params")) snprintf(v, sizeof v, np < 1000000000ull ? "%.2f M" : "%.2f B", (double)np / (np < 1000000000ull ? 1e6 : 1e9));
        else if (!strcmp(t, "backend")) s = r->backend;
        else if (!strcmp(t, "ngl")) snprintf(v, sizeof v, "%lld", (long long)r->n_gpu_layers);
        else if (!strcmp(t, "threads")) snprintf(v, sizeof v, "%lld", (long long)r->n_threads);
        else if (!strcmp(t, "n_batch")) snprintf(v, sizeof v, "%lld", (long long)r->n_batch);
        else if (!strcmp(t, "n_ubatch")) snprintf(v, sizeof v, "%lld", (long long)r->n_ubatch);
        else if (!strcmp(t, "type_k")) s = r->type_k;
        else if (!strcmp(t, "type_v")) s = r->type_v;
        else if (!strcmp(t, "fa")) s = "1";
        else if (!strcmp(t, "test")) bench_test_name(r, v, sizeof v);
        else if (!strcmp(t, "t/s")) {
            snprintf(v, sizeof v, "%.2f ± %.2f", st->avg_ts, st->std_ts);
            w += 1; /* '±' is two bytes */
        } else {
            /* GB/s, % of bw: for tg tests, the weights one decode step reads, each token */
            int tg = r->n_gen > 0 && r->n_prompt == 0;
            double gbs = st->avg_ts * (double)r->model->weight_bytes / 1e9;
            if (!tg) v[0] = 0;
            else if (!strcmp(t, "GB/s")) snprintf(v, sizeof v, "%.2f", gbs);
            else if (r->bw_gbs > 0) snprintf(v, sizeof v, "%.0f%%", 100 * gbs / r->bw_gbs);
            else v[0] = 0;
        }
        fprintf(p->f, " %*s |", w, s);
    }
    fprintf(p->f, "\n");
    free(model);
    return SB_OK;
}

// ---- the printer ----

void bench_print_header(bench_printer *p) {
    field f[N_FIELDS];
    switch (p->format) {
    case BENCH_OUT_MD: md_header(p); break;
    case BENCH_OUT_JSON: fprintf(p->f, "[\n"); break;
    case BENCH_OUT_CSV:
        field_names(f);
        for (int i = 0; i < N_FIELDS; i++) fprintf(p->f, i ? ",%s" : "%s", f[i].name);
        fprintf(p->f, "\n");
        break;
    case BENCH_OUT_SQL:
        field_names(f);
        fprintf(p->f, "CREATE TABLE IF NOT EXISTS llama_bench (\n");
        for (int i = 0; i < N_FIELDS; i++)
            fprintf(p->f, "  %s %s%s\n", f[i].name, f[i].k == K_STR ? "TEXT" : f[i].k == K_FLOAT ? "REAL" : "INTEGER",
                    i + 1 < N_FIELDS ? "," : "");
        fprintf(p->f, ");\n\n");
        break;
    default: break;
    }
}

sb_status bench_print_row(bench_printer *p, const bench_row *r) {
    if (p->format == BENCH_OUT_NONE) return SB_OK;
    stats st = row_stats(r);
    field f[N_FIELDS];
    fill_fields(p, r, &st, f);
    sb_status s;
    switch (p->format) {
    case BENCH_OUT_MD: s = md_row(p, r, &st); break;
    case BENCH_OUT_JSON:
    case BENCH_OUT_JSONL: s = print_json(p, r, f); break;
    default: s = print_delimited(p, f); break;
    }
    p->n_rows++;
    fflush(p->f);
    return s;
}

void bench_print_footer(bench_printer *p) {
    if (p->format == BENCH_OUT_JSON) fprintf(p->f, "%s]\n", p->n_rows ? "\n" : "");
    if (p->format == BENCH_OUT_MD) fprintf(p->f, "\nbuild: %s (%d)\n", p->machine->build_commit, p->machine->build_number);
    fflush(p->f);
}
