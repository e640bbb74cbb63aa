/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/quant/test_conformance.c — bit-exactness against llama.cpp on the shared vectors
 * testdata/quant/<type>.qv: quantize(input) must equal llama.cpp's bytes byte for byte, and
 * dequantize(llama.cpp bytes) must equal llama.cpp's floats bit for bit (memcmp, so -0 and NaN
 * patterns count). The quantizer checked is the one llama-quantize uses without an imatrix
 * (qk_chunk_quantizer: the ref for every type except IQ4_NL, which is quantize_iq4_nl).
 * Usage: quant_test_conformance [type ...]   (no arguments: every type). Exit 77 (ctest SKIP)
 * only when the shared quant/ folder is absent.
 */
#include "quant/quant.h"
#include "qv.h"

#include <sys/stat.h>

typedef struct conf_type {
    const char *name;   /* file stem: testdata/quant/<name>.qv */
    int type;
} conf_type;

static const conf_type types[] = {
    {"f16", SB_TYPE_F16},     {"bf16", SB_TYPE_BF16},   {"q4_0", SB_TYPE_Q4_0},   {"q4_1", SB_TYPE_Q4_1},
    {"q5_0", SB_TYPE_Q5_0},   {"q5_1", SB_TYPE_Q5_1},   {"q8_0", SB_TYPE_Q8_0},   {"q2_K", SB_TYPE_Q2_K},
    {"q3_K", SB_TYPE_Q3_K},   {"q4_K", SB_TYPE_Q4_K},   {"q5_K", SB_TYPE_Q5_K},   {"q6_K", SB_TYPE_Q6_K},
    {"iq4_nl", SB_TYPE_IQ4_NL}, {"iq4_xs", SB_TYPE_IQ4_XS},
};
#define N_TYPES ((int)(sizeof types / sizeof types[0]))

static void check_type(const conf_type *ct) {
    char rel[64];
    snprintf(rel, sizeof rel, "quant/%s.qv", ct->name);
    const char *path = test_data_path(rel);
    qv_file q;
    const int rc = qv_load(path, &q);
    CHECKF(rc == 0, "%s: cannot load %s (%s)", ct->name, path, rc == -1 ? "absent" : "malformed");
    if (rc) { qv_free(&q); return; }

    const qk_traits *t = qk_get(ct->type);
    uint64_t row_bytes = 0;
    CHECK_EQ_INT(q.type, ct->type);
    CHECKF(qk_row_bytes(ct->type, q.n_per_row, &row_bytes) == 0 && row_bytes == q.row_bytes,
           "%s: row_bytes %u in file, %llu from traits", ct->name, q.row_bytes, (unsigned long long)row_bytes);
    const qk_from_float_fn quantize = qk_chunk_quantizer(ct->type);
    CHECKF(quantize && t->to_float, "%s: missing converters", ct->name);
    if (q.type != (uint32_t)ct->type || row_bytes != q.row_bytes || !quantize || !t->to_float) { qv_free(&q); return; }

    uint8_t *qbuf = (uint8_t *)malloc(q.row_bytes);
    float *fbuf = (float *)malloc((size_t)q.n_per_row * sizeof(float));
    int q_rows = 0, d_rows = 0, reported = 0;
    long q_bytes = 0, d_vals = 0;
    for (uint32_t r = 0; r < q.n_rows; r++) {
        const float *in = q.input + (size_t)r * q.n_per_row;
        const uint8_t *want_q = q.quant + (size_t)r * q.row_bytes;
        const float *want_f = q.dequant + (size_t)r * q.n_per_row;

        memset(qbuf, 0xCD, q.row_bytes);                       /* poison: unwritten bytes show */
        quantize(in, qbuf, q.n_per_row);
        int row_ok = 1;
        for (uint32_t b = 0; b < q.row_bytes; b++) {
            if (qbuf[b] == want_q[b]) { q_bytes++; continue; }
            if (row_ok && reported++ < 8)
                fprintf(stderr, "  %s row %u: quant byte %u (block %llu) = 0x%02x, llama.cpp 0x%02x\n", ct->name, r, b,
                        (unsigned long long)(b / t->type_size), qbuf[b], want_q[b]);
            row_ok = 0;
        }
        q_rows += row_ok;

        memset(fbuf, 0xCD, (size_t)q.n_per_row * sizeof(float));
        t->to_float(want_q, fbuf, q.n_per_row);
        row_ok = 1;
        for (uint32_t e = 0; e < q.n_per_row; e++) {
            if (memcmp(&fbuf[e], &want_f[e], sizeof(float)) == 0) { d_vals++; continue; }
            if (row_ok && reported++ < 8) {
                uint32_t a, b;
                memcpy(&a, &fbuf[e], 4);
                memcpy(&b, &want_f[e], 4);
                fprintf(stderr, "  %s row %u: dequant[%u] = 0x%08x (%g), llama.cpp 0x%08x (%g)\n", ct->name, r, e, a,
                        (double)fbuf[e], b, (double)want_f[e]);
            }
            row_ok = 0;
        }
        d_rows += row_ok;
    }
    printf("%-7s quantize: %d/%u rows, %ld/%llu bytes identical; dequantize: %d/%u rows, %ld/%llu values bit-exact\n",
           ct->name, q_rows, q.n_rows, q_bytes, (unsigned long long)q.n_rows * q.row_bytes, d_rows, q.n_rows, d_vals,
           (unsigned long long)q.n_rows * q.n_per_row);
    CHECKF(q_rows == (int)q.n_rows, "%s: %u rows quantize differently from llama.cpp", ct->name, q.n_rows - q_rows);
    CHECKF(d_rows == (int)q.n_rows, "%s: %u rows dequantize differently from llama.cpp", ct->name, q.n_rows - d_rows);
    CHECK(q.n_rows > 0);
    free(qbuf);
    free(fbuf);
    qv_free(&q);
}

int main(int argc, char **argv) {
    struct stat st;
    const char *dir = test_data_path("quant");
    if (stat(dir, &st) != 0) {
        printf("SKIP: shared quantization vectors absent (%s); set SB_TESTDATA\n", dir);
        return 77;
    }
    if (argc <= 1) {
        for (int i = 0; i < N_TYPES; i++) check_type(&types[i]);
    } else {
        for (int a = 1; a < argc; a++) {
            int found = 0;
            for (int i = 0; i < N_TYPES; i++) {
                if (strcmp(argv[a], types[i].name) == 0) { check_type(&types[i]); found = 1; }
            }
            CHECKF(found, "unknown type name '%s'", argv[a]);
        }
    }
    return test_summary();
}
