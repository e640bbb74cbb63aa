/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/bench.h — what the parts of `sb bench` share: one result row with llama-bench's fields,
 * the model facts llama-bench reports (model_type in its "arch size ftype" form, model_size,
 * model_n_params), the machine facts (build commit, cpu_info, gpu_info), the list syntax of
 * llama-bench's flags, and the output printers (md, csv, json, jsonl, sql). Uses only the public
 * header.
 */
#ifndef SB_TOOLS_BENCH_H
#define SB_TOOLS_BENCH_H

#include "sonicboom.h"

#include <stdint.h>
#include <stdio.h>

// ---- lists: llama-bench's "1,2", "first-last", "first-last+step", "first-last*mult" ----

#define BENCH_MAX_LIST 64

/* Append the values of s to out[*n..] (at most BENCH_MAX_LIST in all). Values in [lo, hi]; ranges
 * must grow. 0 on success, -1 on bad syntax, a value out of range or too many values. */
int bench_parse_list(const char *s, int64_t lo, int64_t hi, int64_t *out, int *n);

// ---- model and machine facts ----

typedef struct bench_model_desc {
    const char *filename;   /* as given on the command line */
    char type[256];         /* llama-bench's model_type: "qwen2 1B Q4_K - Medium" */
    uint64_t size;          /* bytes of all tensors in the file (llama_model_size) */
    uint64_t n_params;      /* elements of all tensors in the file (llama_model_n_params) */
    uint64_t weight_bytes;  /* bytes one decode step reads (sb_model_info), for GB/s */
} bench_model_desc;

/* Fill d from the GGUF file at path and the loaded model's info. On failure the sb_status (with
 * sb_last_error set). */
sb_status bench_describe_model(const char *path, const sb_model_info *mi, bench_model_desc *d);

typedef struct bench_machine {
    const char *build_commit; /* the git commit the build was configured at, "unknown" without one */
    int build_number;         /* commits in that history, 0 without one */
    char cpu_info[256];       /* /proc/cpuinfo's "model name", "" if unknown */
    char gpu_info[256];       /* CUDA device 0's name when one is usable, else "" */
    int have_gpu;             /* a CUDA device is usable */
} bench_machine;

void bench_machine_info(bench_machine *m);

// ---- rows and printers ----

typedef struct bench_row {
    const bench_model_desc *model;
    const char *backend;        /* "CPU" or "CUDA": where the session ran */
    int64_t n_batch, n_ubatch, n_threads, n_gpu_layers;
    const char *type_k, *type_v; /* "f16" / "f32" */
    const char *load_mode;       /* llama-bench's load_mode: "mmap" (the file mapped) or "none" (read into memory) */
    int64_t n_prompt, n_gen, n_depth;
    char test_time[32];         /* RFC 3339, UTC */
    const double *samples_s;    /* seconds per repetition */
    int n_samples;
    double bw_gbs;              /* the read bandwidth the md "% of bw" column compares with, 0 none */
} bench_row;

typedef enum { BENCH_OUT_NONE, BENCH_OUT_MD, BENCH_OUT_CSV, BENCH_OUT_JSON, BENCH_OUT_JSONL, BENCH_OUT_SQL } bench_format;

/* "md", "csv", "json", "jsonl", "sql" or "none". 0 on success, -1 for any other name. */
int bench_format_parse(const char *s, bench_format *out);

/* Which optional columns the md table shows (llama-bench shows a parameter when it is not its
 * default or has several values). */
typedef struct bench_md_columns {
    int ngl, threads, n_batch, n_ubatch, type_kv, flash_attn;
} bench_md_columns;

typedef struct bench_printer {
    bench_format format;
    FILE *f;
    const bench_machine *machine;
    bench_md_columns md;
    int n_rows;
} bench_printer;

void bench_print_header(bench_printer *p);
/* 0 on success; SB_ERR_OOM when the JSON library cannot allocate. */
sb_status bench_print_row(bench_printer *p, const bench_row *r);
void bench_print_footer(bench_printer *p);

/* Test name as llama-bench writes it: "pp512", "tg128", "pp512+tg128", then " @ d4096" at depth. */
void bench_test_name(const bench_row *r, char *buf, size_t cap);

/* A copy of s as valid UTF-8 (each byte of an invalid sequence becomes U+FFFD), to free(); NULL when
 * out of memory. For the md table (terminal_safe): control characters (C0, DEL, C1) become '?' and
 * '|' becomes '\|', so metadata cannot move the cursor, recolour the terminal or split a cell. */
char *bench_clean_text(const char *s, int terminal_safe);

#endif
