/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/quant/qv.h — reader for the shared quantization vectors testdata/quant/<type>.qv
 * (format in testdata/README.md): magic "SBQV1\0\0\0", u32 type, n_rows, n_per_row, row_bytes,
 * then f32 input[n_rows][n_per_row], u8 quant[n_rows][row_bytes], f32 dequant[n_rows][n_per_row].
 * Test-only helper; validates every size before pointing into the buffer.
 */
#ifndef SB_TESTS_QUANT_QV_H
#define SB_TESTS_QUANT_QV_H

#include "test.h"

typedef struct qv_file {
    unsigned char *buf;      /* whole file (owned) */
    uint32_t type, n_rows, n_per_row, row_bytes;
    const float *input;      /* (n_rows, n_per_row), unaligned-safe: copied */
    const uint8_t *quant;    /* (n_rows, row_bytes) */
    const float *dequant;    /* (n_rows, n_per_row) */
} qv_file;

static inline uint32_t qv_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* 0 ok, -1 absent, -2 malformed (message printed). */
static inline int qv_load(const char *path, qv_file *q) {
    size_t size = 0;
    memset(q, 0, sizeof *q);
    q->buf = test_read_file(path, &size);
    if (!q->buf) return -1;
    if (size < 24 || memcmp(q->buf, "SBQV1\0\0\0", 8) != 0) {
        fprintf(stderr, "%s: bad magic or short file (%zu bytes)\n", path, size);
        return -2;
    }
    q->type = qv_u32(q->buf + 8);
    q->n_rows = qv_u32(q->buf + 12);
    q->n_per_row = qv_u32(q->buf + 16);
    q->row_bytes = qv_u32(q->buf + 20);
    const uint64_t nf = (uint64_t)q->n_rows * q->n_per_row * 4, nq = (uint64_t)q->n_rows * q->row_bytes;
    if (24 + nf + nq + nf != size) {
        fprintf(stderr, "%s: size %zu does not match header (%u rows x %u, %u B/row)\n", path, size, q->n_rows,
                q->n_per_row, q->row_bytes);
        return -2;
    }
    /* the float arrays may be unaligned (row_bytes arbitrary): copy them into aligned memory */
    float *in = (float *)malloc(nf ? nf : 1), *dq = (float *)malloc(nf ? nf : 1);
    if (!in || !dq) { free(in); free(dq); return -2; }
    memcpy(in, q->buf + 24, nf);
    memcpy(dq, q->buf + 24 + nf + nq, nf);
    q->input = in;
    q->quant = q->buf + 24 + nf;
    q->dequant = dq;
    return 0;
}

static inline void qv_free(qv_file *q) {
    free((void *)q->input);
    free((void *)q->dequant);
    free(q->buf);
    memset(q, 0, sizeof *q);
}

#endif
