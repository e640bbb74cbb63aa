/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/imatrix.h — llama.cpp's importance-matrix GGUF (the output of llama-imatrix) read for
 * `sb quantize --imatrix`: per weight tensor NAME, "NAME.in_sum2" (F32 [n_per_row, n_mat], the
 * summed squared activations of each column, per expert matrix) and "NAME.counts" (F32, n_mat
 * values: how many activations were summed), optionally "NAME.in_sum" (F32, same size, ignored);
 * metadata imatrix.datasets (string array), imatrix.chunk_count and imatrix.chunk_size (u32).
 * The importance of column i of matrix j is in_sum2[j][i] / counts[j], or 1 where counts[j] is 0
 * (llama-quantize's load_imatrix).
 * Layer 2 (runtime; uses format). Hostile input: every count, size, type and value is checked and
 * a failure is SB_ERR_FORMAT with one line naming the file and the problem; values must be finite
 * and >= 0, counts finite, integral and >= 0.
 * Non-goals: the legacy .dat format (refused with a hint to convert it), --include/--exclude-weights.
 */
#ifndef SB_RUNTIME_IMATRIX_H
#define SB_RUNTIME_IMATRIX_H

#include "sonicboom.h"

#include <stdint.h>

typedef struct rt_imatrix_entry {
    char *name;          /* the weight tensor's name (the file's name without ".in_sum2") */
    int64_t n_per_row;   /* values per matrix = the tensor's ne[0] */
    int64_t n_mat;       /* matrices = the tensor's ne[2] (experts), 1 for a 2-D weight */
    float *values;       /* n_mat * n_per_row importances, matrix after matrix */
} rt_imatrix_entry;

typedef struct rt_imatrix {
    char *path;
    rt_imatrix_entry *entries;
    int64_t n;
    char *dataset;          /* the first of imatrix.datasets, NULL when the list is empty */
    uint32_t chunk_count;   /* imatrix.chunk_count */
} rt_imatrix;

/* Read and check `path`. On failure *m holds nothing to free. */
sb_status rt_imatrix_load(const char *path, rt_imatrix *m);
void rt_imatrix_free(rt_imatrix *m);

/* The entry for weight tensor `name`, or NULL. */
const rt_imatrix_entry *rt_imatrix_find(const rt_imatrix *m, const char *name);

#endif
