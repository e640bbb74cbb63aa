/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/cmd_info.c — `sb info FILE [--json]`: a GGUF file's header, every metadata key with its
 * type and value (long arrays summarised), the tensor table and totals (parameters, bytes, bits
 * per weight, tensors per type), and for a file that loads as a model the weight and KV-cache bytes
 * one token costs. Uses only the public header.
 * Every string from the file is untrusted: in text mode control characters (C0, DEL, C1), bidi
 * overrides and bytes that are not UTF-8 are shown as \xNN / \uNNNN escapes, so metadata cannot
 * drive the terminal; in JSON mode strings go through cJSON after invalid UTF-8 (and NUL, which a
 * C string cannot carry) is replaced by U+FFFD, and an entry that needed it says "lossy": true.
 * Integers and floats are written exactly (raw numbers: cJSON's doubles would round 64-bit values).
 * Exit: 0 ok, 1 bad file (one line "error: STATUS: detail"), 2 usage.
 */
#include "args.h"
#include "cli_io.h"
#include "sb.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARRAY_PREVIEW 8 /* array elements shown before "..." */
#define STR_PREVIEW 120 /* string bytes shown in text mode */

static void usage(FILE *f) {
    fprintf(f, "usage: sb info FILE [--json]\n"
               "  Print a GGUF file's header, metadata, tensor table and totals; for a model this runtime\n"
               "  loads, the weight bytes a decode step reads and the KV cache bytes per token.\n"
               "  --json   machine-readable output\n");
}

// ---- untrusted strings ----

static void put_text_(const char *s, size_t n) { sb_put_safe(stdout, s, n, 1); }

/* A JSON string item of n untrusted bytes (NULL when out of memory). */
static cJSON *json_str(const char *s, size_t n, int *lossy) {
    char *c = sb_utf8_clean(s, n, lossy);
    cJSON *j = c ? cJSON_CreateString(c) : NULL;
    free(c);
    return j;
}

/* A JSON number written exactly as fmt prints it. */
static cJSON *json_raw(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static cJSON *json_raw(const char *fmt, ...) {
    char buf[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return cJSON_CreateRaw(buf);
}

// ---- printing values ----

static void print_elem(const sb_gguf *g, int64_t i, uint64_t j, sb_gguf_type t) {
    if (t == SB_GGUF_STRING) {
        const char *s;
        size_t n;
        if (sb_gguf_get_str(g, i, j, &s, &n) != SB_OK) return;
        int cut = n > STR_PREVIEW;
        putchar('"');
        put_text_(s, cut ? STR_PREVIEW : n);
        printf(cut ? "...\" (%zu bytes)" : "\"", n);
    } else if (t == SB_GGUF_FLOAT32 || t == SB_GGUF_FLOAT64) {
        double v = 0;
        sb_gguf_get_float(g, i, j, &v);
        printf(v != v || v - v != 0 ? "%g" : t == SB_GGUF_FLOAT32 ? "%.9g" : "%.17g", v);
    } else if (t == SB_GGUF_BOOL) {
        uint64_t v = 0;
        sb_gguf_get_uint(g, i, j, &v);
        printf(v ? "true" : "false");
    } else if (t == SB_GGUF_INT8 || t == SB_GGUF_INT16 || t == SB_GGUF_INT32 || t == SB_GGUF_INT64) {
        int64_t v = 0;
        sb_gguf_get_int(g, i, j, &v);
        printf("%" PRId64, v);
    } else {
        uint64_t v = 0;
        sb_gguf_get_uint(g, i, j, &v);
        printf("%" PRIu64, v);
    }
}

/* Element j of key i as a JSON item (strings cleaned, numbers exact, non-finite floats null). */
static cJSON *json_elem(const sb_gguf *g, int64_t i, uint64_t j, sb_gguf_type t, int *lossy) {
    if (t == SB_GGUF_STRING) {
        const char *s = "";
        size_t n = 0;
        sb_gguf_get_str(g, i, j, &s, &n);
        return json_str(s, n, lossy);
    }
    if (t == SB_GGUF_FLOAT32 || t == SB_GGUF_FLOAT64) {
        double v = 0;
        sb_gguf_get_float(g, i, j, &v);
        if (v != v || v - v != 0) return cJSON_CreateNull(); /* JSON has no NaN/Inf */
        return json_raw(t == SB_GGUF_FLOAT32 ? "%.9g" : "%.17g", v);
    }
    if (t == SB_GGUF_BOOL) {
        uint64_t v = 0;
        sb_gguf_get_uint(g, i, j, &v);
        return cJSON_CreateBool(v != 0);
    }
    if (t == SB_GGUF_INT8 || t == SB_GGUF_INT16 || t == SB_GGUF_INT32 || t == SB_GGUF_INT64) {
        int64_t v = 0;
        sb_gguf_get_int(g, i, j, &v);
        return json_raw("%" PRId64, v);
    }
    uint64_t v = 0;
    sb_gguf_get_uint(g, i, j, &v);
    return json_raw("%" PRIu64, v);
}

// ---- totals ----

typedef struct totals {
    uint64_t params, bytes;
    int64_t per_type[SB_TYPE_COUNT];
} totals;

static int collect(const sb_gguf *g, const sb_gguf_info *info, totals *tt) {
    memset(tt, 0, sizeof *tt);
    for (int64_t i = 0; i < info->n_tensors; i++) {
        sb_gguf_tensor t;
        sb_status s = sb_gguf_get_tensor(g, i, &t);
        if (s != SB_OK) return sb_cli_fail(s);
        uint64_t n = 1;
        for (int d = 0; d < 4; d++) n *= (uint64_t)t.ne[d];
        tt->params += n;
        tt->bytes += t.nbytes;
        tt->per_type[t.type]++;
    }
    return 0;
}

// ---- text and JSON reports ----

/* s sanitized, then padded with spaces to width columns (counted in bytes, as printf's %-Ns did). */
static void put_padded(const char *s, int width) {
    put_text_(s, strlen(s));
    for (int k = (int)strlen(s); k < width; k++) putchar(' ');
}

static void put_key(const char *key) { put_padded(key, 44); }

/* A file that loads as a model (a supported architecture, every tensor in place): one line with
 * what running it costs per token — the weight bytes a decode step reads (the resident set), the
 * bytes of tables it only gathers one row per token from (gemma4's per-layer embeddings, an untied
 * token_embd: all the file's other tensor bytes, since a model reads every tensor it holds) and the
 * KV cache bytes (per layer width; Gemma 4's shared-KV layers own none). Files that do not load
 * print nothing more (the header, metadata and tensors above are the report); loading logs nothing. */
typedef struct model_cost {
    bool loaded;
    const char *arch;
    uint64_t step_bytes, gathered_bytes, kv_f16, kv_f32;
} model_cost;

static model_cost model_cost_of(const char *path, uint64_t tensor_bytes, sb_model **m) {
    model_cost c = {0};
    sb_log_set(NULL, NULL, SB_LOG_ERROR);
    sb_status s = sb_model_load(path, NULL, m);
    sb_log_set(sb_cli_log, NULL, SB_LOG_WARN);
    sb_model_info mi;
    if (s != SB_OK || sb_model_get_info(*m, &mi) != SB_OK) return c;
    c = (model_cost){true, mi.arch, mi.weight_bytes, tensor_bytes > mi.weight_bytes ? tensor_bytes - mi.weight_bytes : 0,
                     sb_model_kv_bytes_per_token(*m, SB_TYPE_F16), sb_model_kv_bytes_per_token(*m, SB_TYPE_F32)};
    return c;
}

static void report_model(const char *path, uint64_t tensor_bytes) {
    sb_model *m = NULL;
    const model_cost c = model_cost_of(path, tensor_bytes, &m);
    if (c.loaded)
        printf("model:       %s; %" PRIu64 " bytes of weights read per token (resident), %" PRIu64 " in tables gathered one row per "
               "token; KV cache %" PRIu64 " bytes per token (f16), %" PRIu64 " (f32)\n", c.arch, c.step_bytes, c.gathered_bytes, c.kv_f16,
               c.kv_f32);
    sb_model_free(m);
}

/* the same as a "model" object of the JSON document (nothing when the file does not load) */
static void json_model(cJSON *root, const char *path, uint64_t tensor_bytes) {
    sb_model *m = NULL;
    const model_cost c = model_cost_of(path, tensor_bytes, &m);
    cJSON *o = c.loaded && root ? cJSON_AddObjectToObject(root, "model") : NULL;
    if (o) {
        int lossy = 0;
        cJSON_AddItemToObject(o, "arch", json_str(c.arch, strlen(c.arch), &lossy));
        cJSON_AddItemToObject(o, "weight_bytes_per_token", json_raw("%" PRIu64, c.step_bytes));
        cJSON_AddItemToObject(o, "gathered_table_bytes", json_raw("%" PRIu64, c.gathered_bytes));
        cJSON_AddItemToObject(o, "kv_bytes_per_token_f16", json_raw("%" PRIu64, c.kv_f16));
        cJSON_AddItemToObject(o, "kv_bytes_per_token_f32", json_raw("%" PRIu64, c.kv_f32));
    }
    sb_model_free(m);
}

static void report_text(const char *path, const sb_gguf *g, const sb_gguf_info *info, const totals *tt) {
    printf("file:        ");
    put_text_(path, strlen(path));
    printf("\n");
    printf("version:     %u\n", info->version);
    printf("alignment:   %u\n", info->alignment);
    printf("size:        %" PRIu64 " bytes (data at 0x%" PRIx64 ")\n", info->file_size, info->data_offset);
    printf("metadata:    %" PRId64 " keys\n", info->n_kv);
    printf("tensors:     %" PRId64 "\n\n", info->n_tensors);
    for (int64_t i = 0; i < info->n_kv; i++) {
        const char *key;
        sb_gguf_type type, et;
        uint64_t count;
        sb_gguf_get_kv(g, i, &key, &type, &et, &count);
        if (type == SB_GGUF_ARRAY) {
            printf("  ");
            put_key(key);
            printf(" arr[%s,%" PRIu64 "] = [", sb_gguf_type_name(et), count);
            for (uint64_t j = 0; j < count && j < ARRAY_PREVIEW; j++) {
                if (j) printf(", ");
                print_elem(g, i, j, et);
            }
            printf(count > ARRAY_PREVIEW ? ", ...]\n" : "]\n");
        } else {
            printf("  ");
            put_key(key);
            printf(" %-8s = ", sb_gguf_type_name(type));
            print_elem(g, i, 0, type);
            putchar('\n');
        }
    }
    if (info->n_tensors) printf("\n  %-5s %-40s %-8s %-28s %12s %12s\n", "#", "name", "type", "shape", "offset", "bytes");
    for (int64_t i = 0; i < info->n_tensors; i++) {
        sb_gguf_tensor t;
        sb_gguf_get_tensor(g, i, &t);
        char shape[96];
        int n = snprintf(shape, sizeof shape, "[%" PRId64, t.ne[0]);
        for (uint32_t d = 1; d < t.n_dims && n < (int)sizeof shape; d++)
            n += snprintf(shape + n, sizeof shape - (size_t)n, ", %" PRId64, t.ne[d]);
        if (n < (int)sizeof shape) snprintf(shape + n, sizeof shape - (size_t)n, "]");
        printf("  %-5" PRId64 " ", i);
        put_padded(t.name, 40);
        printf(" %-8s %-28s %#12" PRIx64 " %12" PRIu64 "\n", sb_type_name(t.type), shape, t.offset, t.nbytes);
    }
    printf("\ntotals:      %" PRIu64 " parameters, %" PRIu64 " bytes of tensor data", tt->params, tt->bytes);
    if (tt->params) printf(", %.4f bits per weight", 8.0 * (double)tt->bytes / (double)tt->params);
    printf("\n");
    if (info->n_tensors) {
        printf("types:      ");
        for (int t = 0; t < SB_TYPE_COUNT; t++)
            if (tt->per_type[t]) printf(" %s: %" PRId64, sb_type_name(t), tt->per_type[t]);
        printf("\n");
    }
}

static cJSON *json_metadata(const sb_gguf *g, const sb_gguf_info *info) {
    cJSON *arr = cJSON_CreateArray();
    for (int64_t i = 0; arr && i < info->n_kv; i++) {
        const char *key;
        sb_gguf_type type, et;
        uint64_t count;
        sb_gguf_get_kv(g, i, &key, &type, &et, &count);
        int lossy = 0;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddItemToObject(o, "key", json_str(key, strlen(key), &lossy));
        if (type == SB_GGUF_ARRAY) {
            cJSON_AddStringToObject(o, "type", "arr");
            cJSON_AddStringToObject(o, "elem_type", sb_gguf_type_name(et));
            cJSON_AddItemToObject(o, "count", json_raw("%" PRIu64, count));
            cJSON *v = cJSON_AddArrayToObject(o, "value");
            for (uint64_t j = 0; v && j < count && j < ARRAY_PREVIEW; j++) cJSON_AddItemToArray(v, json_elem(g, i, j, et, &lossy));
            cJSON_AddBoolToObject(o, "truncated", count > ARRAY_PREVIEW);
        } else {
            cJSON_AddStringToObject(o, "type", sb_gguf_type_name(type));
            cJSON_AddItemToObject(o, "value", json_elem(g, i, 0, type, &lossy));
        }
        if (lossy) cJSON_AddTrueToObject(o, "lossy");
    }
    return arr;
}

static cJSON *json_tensors(const sb_gguf *g, const sb_gguf_info *info) {
    cJSON *arr = cJSON_CreateArray();
    for (int64_t i = 0; arr && i < info->n_tensors; i++) {
        sb_gguf_tensor t;
        sb_gguf_get_tensor(g, i, &t);
        int lossy = 0;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddItemToObject(o, "name", json_str(t.name, strlen(t.name), &lossy));
        cJSON_AddStringToObject(o, "type", sb_type_name(t.type));
        cJSON *shape = cJSON_AddArrayToObject(o, "shape");
        for (uint32_t d = 0; shape && d < (t.n_dims ? t.n_dims : 1); d++) cJSON_AddItemToArray(shape, json_raw("%" PRId64, t.ne[d]));
        cJSON_AddItemToObject(o, "offset", json_raw("%" PRIu64, t.offset));
        cJSON_AddItemToObject(o, "bytes", json_raw("%" PRIu64, t.nbytes));
        if (lossy) cJSON_AddTrueToObject(o, "lossy");
    }
    return arr;
}

/* 0, or 1 with "error: SB_ERR_OOM" when the document could not be built. */
static int report_json(const char *path, const sb_gguf *g, const sb_gguf_info *info, const totals *tt) {
    int lossy = 0;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "file", json_str(path, strlen(path), &lossy));
    cJSON_AddItemToObject(root, "version", json_raw("%u", info->version));
    cJSON_AddItemToObject(root, "alignment", json_raw("%u", info->alignment));
    cJSON_AddItemToObject(root, "file_size", json_raw("%" PRIu64, info->file_size));
    cJSON_AddItemToObject(root, "data_offset", json_raw("%" PRIu64, info->data_offset));
    cJSON_AddItemToObject(root, "n_kv", json_raw("%" PRId64, info->n_kv));
    cJSON_AddItemToObject(root, "n_tensors", json_raw("%" PRId64, info->n_tensors));
    cJSON_AddItemToObject(root, "metadata", json_metadata(g, info));
    cJSON_AddItemToObject(root, "tensors", json_tensors(g, info));
    cJSON *tot = cJSON_AddObjectToObject(root, "totals");
    cJSON_AddItemToObject(tot, "parameters", json_raw("%" PRIu64, tt->params));
    cJSON_AddItemToObject(tot, "bytes", json_raw("%" PRIu64, tt->bytes));
    cJSON_AddItemToObject(tot, "bits_per_weight", json_raw("%.6f", tt->params ? 8.0 * (double)tt->bytes / (double)tt->params : 0.0));
    cJSON *types = cJSON_AddObjectToObject(tot, "types");
    for (int t = 0; types && t < SB_TYPE_COUNT; t++)
        if (tt->per_type[t]) cJSON_AddItemToObject(types, sb_type_name(t), json_raw("%" PRId64, tt->per_type[t]));
    json_model(root, path, tt->bytes);
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) {
        fprintf(stderr, "error: SB_ERR_OOM: sb info: building the JSON document\n");
        return 1;
    }
    puts(text);
    cJSON_free(text);
    return 0;
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return usage_error("info", "unknown option '%s'", argv[i]);
        } else if (!path) path = argv[i];
        else {
            return usage_error("info", "more than one FILE");
        }
    }
    if (!path) return usage_error("info", "no FILE given");
    sb_gguf *g;
    cli_watch_file(path);
    sb_status s = sb_gguf_open(path, &g);
    if (s != SB_OK) return sb_cli_fail(s);
    sb_gguf_info info;
    sb_gguf_get_info(g, &info);
    totals tt;
    int rc = collect(g, &info, &tt);
    if (rc == 0 && json) rc = report_json(path, g, &info, &tt);
    else if (rc == 0) report_text(path, g, &info, &tt);
    sb_gguf_free(g);
    if (rc == 0 && !json) report_model(path, tt.bytes);
    return rc;
}
