/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/cmd_info.c — `sb info FILE [--json]`: a GGUF file's header, every metadata key with its
 * type and value (long arrays summarised), the tensor table and totals (parameters, bytes, bits
 * per weight, tensors per type). Uses only the public header.
 * Exit: 0 ok, 1 bad file (one line "error: STATUS: detail"), 2 usage.
 */
#include "args.h"
#include "cli_io.h"
#include "sb.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define ARRAY_PREVIEW 8 /* array elements shown before "..." */
#define STR_PREVIEW 120 /* string bytes shown in text mode */

static void usage(FILE *f) {
    fprintf(f, "usage: sb info FILE [--json]\n"
               "  Print a GGUF file's header, metadata, tensor table and totals.\n"
               "  --json   machine-readable output\n");
}

// ---- printing values ----

/* Print bytes as a JSON string body (escaped) or as text with control bytes escaped. */
static void print_escaped(const char *s, size_t n, int json) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') printf("\\n");
        else if (c == '\t') printf("\\t");
        else if (c == '\r') printf("\\r");
        else if (c < 0x20 || c == 0x7f) printf(json ? "\\u%04x" : "\\x%02x", c);
        else putchar(c);
    }
}

static void print_elem(const sb_gguf *g, int64_t i, uint64_t j, sb_gguf_type t, int json) {
    if (t == SB_GGUF_STRING) {
        const char *s;
        size_t n;
        if (sb_gguf_get_str(g, i, j, &s, &n) != SB_OK) return;
        int cut = !json && n > STR_PREVIEW;
        putchar('"');
        print_escaped(s, cut ? STR_PREVIEW : n, json);
        printf(cut ? "...\" (%zu bytes)" : "\"", n);
    } else if (t == SB_GGUF_FLOAT32 || t == SB_GGUF_FLOAT64) {
        double v = 0;
        sb_gguf_get_float(g, i, j, &v);
        if (v != v || v - v != 0) printf(json ? "null" : "%g", v); /* JSON has no NaN/Inf */
        else printf(t == SB_GGUF_FLOAT32 ? "%.9g" : "%.17g", v);
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

static void print_shape(const sb_gguf_tensor *t) {
    printf("[");
    for (uint32_t d = 0; d < (t->n_dims ? t->n_dims : 1); d++) printf(d ? ", %" PRId64 : "%" PRId64, t->ne[d]);
    printf("]");
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

static void report_text(const char *path, const sb_gguf *g, const sb_gguf_info *info, const totals *tt) {
    printf("file:        %s\n", path);
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
            printf("  %-44s arr[%s,%" PRIu64 "] = [", key, sb_gguf_type_name(et), count);
            for (uint64_t j = 0; j < count && j < ARRAY_PREVIEW; j++) {
                if (j) printf(", ");
                print_elem(g, i, j, et, 0);
            }
            printf(count > ARRAY_PREVIEW ? ", ...]\n" : "]\n");
        } else {
            printf("  %-44s %-8s = ", key, sb_gguf_type_name(type));
            print_elem(g, i, 0, type, 0);
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
        printf("  %-5" PRId64 " %-40s %-8s %-28s %#12" PRIx64 " %12" PRIu64 "\n", i, t.name, sb_type_name(t.type), shape,
               t.offset, t.nbytes);
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

static void report_json(const char *path, const sb_gguf *g, const sb_gguf_info *info, const totals *tt) {
    printf("{\n  \"file\": \"");
    print_escaped(path, strlen(path), 1);
    printf("\",\n  \"version\": %u,\n  \"alignment\": %u,\n  \"file_size\": %" PRIu64 ",\n  \"data_offset\": %" PRIu64
           ",\n  \"n_kv\": %" PRId64 ",\n  \"n_tensors\": %" PRId64 ",\n  \"metadata\": [",
           info->version, info->alignment, info->file_size, info->data_offset, info->n_kv, info->n_tensors);
    for (int64_t i = 0; i < info->n_kv; i++) {
        const char *key;
        sb_gguf_type type, et;
        uint64_t count;
        sb_gguf_get_kv(g, i, &key, &type, &et, &count);
        printf(i ? ",\n    {\"key\": \"" : "\n    {\"key\": \"");
        print_escaped(key, strlen(key), 1);
        if (type == SB_GGUF_ARRAY) {
            printf("\", \"type\": \"arr\", \"elem_type\": \"%s\", \"count\": %" PRIu64 ", \"value\": [", sb_gguf_type_name(et), count);
            for (uint64_t j = 0; j < count && j < ARRAY_PREVIEW; j++) {
                if (j) printf(", ");
                print_elem(g, i, j, et, 1);
            }
            printf("], \"truncated\": %s}", count > ARRAY_PREVIEW ? "true" : "false");
        } else {
            printf("\", \"type\": \"%s\", \"value\": ", sb_gguf_type_name(type));
            print_elem(g, i, 0, type, 1);
            printf("}");
        }
    }
    printf("\n  ],\n  \"tensors\": [");
    for (int64_t i = 0; i < info->n_tensors; i++) {
        sb_gguf_tensor t;
        sb_gguf_get_tensor(g, i, &t);
        printf(i ? ",\n    {\"name\": \"" : "\n    {\"name\": \"");
        print_escaped(t.name, strlen(t.name), 1);
        printf("\", \"type\": \"%s\", \"shape\": ", sb_type_name(t.type));
        print_shape(&t);
        printf(", \"offset\": %" PRIu64 ", \"bytes\": %" PRIu64 "}", t.offset, t.nbytes);
    }
    printf("\n  ],\n  \"totals\": {\"parameters\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"bits_per_weight\": %.6f, \"types\": {",
           tt->params, tt->bytes, tt->params ? 8.0 * (double)tt->bytes / (double)tt->params : 0.0);
    int first = 1;
    for (int t = 0; t < SB_TYPE_COUNT; t++)
        if (tt->per_type[t]) {
            printf("%s\"%s\": %" PRId64, first ? "" : ", ", sb_type_name(t), tt->per_type[t]);
            first = 0;
        }
    printf("}}\n}\n");
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
    if (rc == 0) (json ? report_json : report_text)(path, g, &info, &tt);
    sb_gguf_free(g);
    return rc;
}
