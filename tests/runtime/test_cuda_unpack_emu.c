/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_unpack_emu.c — the CUDA dp4a weight path without a GPU: the device code
 * that unpacks a 32-value sub-block of every dp4a weight type (backend/cuda/device/unpack.cuh) and
 * the T = 1 row dot built on it (device/gemv_dot.cuh), compiled for the host by the C++ compiler
 * (tests/runtime/cuda_unpack_emu.cc against tests/codegen/emu/cuda_emu.h) and checked against the
 * plain-C reference (quant/: the llama.cpp-exact dequantizers):
 *  - every element of every sub-block: d_half * w + dm_half == the reference dequantized value (to
 *    the rounding of the reference's own f32 products), for rows of reference-quantized random data
 *    and of random bytes (every bit pattern, finite scales);
 *  - cu_fetch + cu_decode (the registers-before-the-wait GEMV, the MMA GEMM) == cu_unpack, bit for bit;
 *  - the row dot against q8_1 (every type) and q8_K (the 256-value super-block types) within 1e-5 of
 *    the f64 dot of the dequantized operands (a single wrong element moves it ~1e-3);
 *  - the IQ4 code-point lookup for every 4-byte index pattern;
 *  - no misaligned load: rows sit as on the device (a 256-byte-aligned buffer, row after row) and the
 *    host build traps on any load the GPU would fault on (-fsanitize=alignment); each type runs in a
 *    child process, so a trap names its type.
 * Runs from the repository root (ctest does). SKIPs (exit 77) without a host C++ compiler ($CXX or c++).
 * Non-goals: warp collectives and launch geometry (test_cuda_ops on a GPU).
 */
#include "dev_layout.h"
#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "test.h"
#include "codegen/emu/emu_build.h"

#include <sys/wait.h>

#define K_ROW 1024
#define N_ROWS 4

typedef int (*unpack_fn)(int, const uint8_t *, int, int, int *, float *);
typedef int (*dot_fn)(int, int, const uint8_t *, const uint8_t *, long long, float *);
static unpack_fn emu_unpack;
static dot_fn emu_dot;
static unsigned long long (*emu_row_bytes)(int, long long);
static int (*emu_k_type)(int);
static int (*emu_iq4_lookup)(unsigned);
static uint64_t seed = 0x5EED0C0DAull;

static const int types[] = {SB_TYPE_Q4_0, SB_TYPE_Q4_1, SB_TYPE_Q5_0, SB_TYPE_Q5_1, SB_TYPE_Q8_0,  SB_TYPE_IQ4_NL,
                            SB_TYPE_Q2_K, SB_TYPE_Q3_K, SB_TYPE_Q4_K, SB_TYPE_Q5_K, SB_TYPE_Q6_K, SB_TYPE_IQ4_XS};

/* byte offsets of a block's f16 scale fields (random-byte blocks get finite ones there) */
static int f16_fields(int type, int *off) {
    switch (type) {
    case SB_TYPE_Q4_0: case SB_TYPE_Q5_0: case SB_TYPE_Q8_0: case SB_TYPE_IQ4_NL: case SB_TYPE_IQ4_XS: off[0] = 0; return 1;
    case SB_TYPE_Q4_1: case SB_TYPE_Q5_1: case SB_TYPE_Q4_K: case SB_TYPE_Q5_K: off[0] = 0, off[1] = 2; return 2;
    case SB_TYPE_Q2_K: off[0] = 80, off[1] = 82; return 2;
    case SB_TYPE_Q3_K: off[0] = 108; return 1;
    case SB_TYPE_Q6_K: off[0] = 208; return 1;
    default: return 0;
    }
}

/* N_ROWS rows of K_ROW values: rows 0-1 quantized from random normals of different scales by the
 * reference quantizer, rows 2-3 random bytes with finite random f16 scales */
static void fill_rows(int type, uint8_t *w, uint64_t rb) {
    const qk_traits *tr = qk_get(type);
    float x[K_ROW];
    for (int r = 0; r < 2; r++) {
        const float sc = r ? 3.0f : 0.02f;
        for (int k = 0; k < K_ROW; k++) x[k] = sc * test_rand_normal(&seed) + (r ? 0.5f * sc : 0.0f);
        tr->from_float_ref(x, w + (uint64_t)r * rb, K_ROW);
    }
    int off[2];
    const int nf = f16_fields(type, off);
    for (int r = 2; r < N_ROWS; r++) {
        uint8_t *row = w + (uint64_t)r * rb;
        for (uint64_t b = 0; b < rb; b++) row[b] = (uint8_t)(test_rand_u64(&seed) >> 32);
        for (int64_t blk = 0; blk < K_ROW / tr->blck; blk++)
            for (int f = 0; f < nf; f++) {
                const uint16_t h = qk_fp32_to_fp16((test_rand_uniform(&seed) - 0.5f) * 0.25f);
                memcpy(row + (uint64_t)blk * (uint64_t)tr->type_size + (uint64_t)off[f], &h, 2);
            }
    }
}

/* one type's checks (in a child process: the exit status is its failure count) */
static void check_type(int type) {
    const qk_traits *tr = qk_get(type);
    const uint64_t grb = (uint64_t)(K_ROW / tr->blck) * (uint64_t)tr->type_size, rb = emu_row_bytes(type, K_ROW);
    CHECKF(rb == emu_dev_bytes(type, grb), "%s: device row bytes %llu (GGUF %llu)", tr->name, (unsigned long long)rb, (unsigned long long)grb);
    uint8_t *g = aligned_alloc(256, (size_t)((N_ROWS * grb + 255) & ~(uint64_t)255) + 256);
    fill_rows(type, g, grb);
    uint8_t *w = malloc((size_t)(N_ROWS * grb)); /* the GGUF rows, kept for the reference */
    memcpy(w, g, (size_t)(N_ROWS * grb));
    g = test_to_dev_layout(type, g, N_ROWS * grb); /* what the kernels read */
    float deq[K_ROW], xf[K_ROW], xd[K_ROW];
    int bad_elems = 0, bad_pairs = 0;
    for (int r = 0; r < N_ROWS; r++) {
        const uint8_t *row = g + (uint64_t)r * rb;
        tr->to_float(w + (uint64_t)r * grb, deq, K_ROW);
        for (int j = 0; j < K_ROW / 32; j++) {
            int wu[8], wf[8];
            float du[4], df[4];
            CHECK(emu_unpack(type, row, j, 0, wu, du) == 0);
            CHECK(emu_unpack(type, row, j, 1, wf, df) == 0);
            if (memcmp(wu, wf, sizeof wu) || memcmp(du, df, sizeof du)) {
                if (bad_pairs++ < 3) fprintf(stderr, "%s row %d sub-block %d: fetch + decode != unpack\n", tr->name, r, j);
            }
            const int8_t *q = (const int8_t *)wu;
            for (int e = 0; e < 32; e++) {
                const int h = e / 16;
                const double dh = du[h], mh = du[2 + h], v = dh * q[e] + mh, ref = deq[32 * j + e];
                const double tol = 2.5e-7 * (fabs(dh * q[e]) + fabs(mh)) + 1e-30;
                if (!(fabs(v - ref) <= tol)) {
                    if (bad_elems++ < 5)
                        fprintf(stderr, "%s row %d element %d: d %g * w %d + m %g = %.9g, reference %.9g\n", tr->name, r, 32 * j + e, dh, q[e],
                                mh, v, ref);
                }
            }
        }
        /* the row dot, q8_1 and (super-block types) q8_K activations */
        for (int k = 0; k < K_ROW; k++) xf[k] = test_rand_normal(&seed) * (k % 7 == 0 ? 4.0f : 1.0f);
        for (int q8k = 0; q8k < 2; q8k++) {
            if (q8k && !emu_k_type(type)) continue;
            uint8_t xq[K_ROW / 256 * sizeof(blk_q8_K)] __attribute__((aligned(16)));
            if (q8k) {
                qk_quantize_row_q8_K_ref(xf, xq, K_ROW);
                qk_dequantize_row_q8_K(xq, xd, K_ROW);
            } else {
                qk_quantize_row_q8_1_ref(xf, xq, K_ROW);
                qk_dequantize_row_q8_1(xq, xd, K_ROW);
            }
            double ref = 0, mag = 0;
            for (int k = 0; k < K_ROW; k++) ref += (double)deq[k] * xd[k], mag += fabs((double)deq[k] * xd[k]);
            float got = NAN;
            CHECK(emu_dot(type, q8k, row, xq, K_ROW, &got) == 0);
            CHECKF(fabs(got - ref) <= 1e-5 * mag + 1e-30, "%s row %d x %s: dot %.9g, f64 reference %.9g (sum |terms| %.3g)", tr->name, r,
                   q8k ? "q8_K" : "q8_1", got, ref, mag);
        }
    }
    CHECKF(bad_pairs == 0, "%s: %d sub-blocks where fetch + decode and unpack differ", tr->name, bad_pairs);
    CHECKF(bad_elems == 0, "%s: %d elements off the reference dequantizer", tr->name, bad_elems);
    free(w), free(g);
}

int main(void) {
    void *h = emu_build("tests/runtime/cuda_unpack_emu.cc");
    if (h) {
        *(void **)&emu_unpack = dlsym(h, "sb_emu_unpack");
        *(void **)&emu_dot = dlsym(h, "sb_emu_dot");
        *(void **)&emu_row_bytes = dlsym(h, "sb_emu_row_bytes");
        *(void **)&emu_k_type = dlsym(h, "sb_emu_k_type");
        *(void **)&emu_iq4_lookup = dlsym(h, "sb_emu_iq4_lookup");
        CHECK(emu_unpack && emu_dot && emu_row_bytes && emu_k_type && emu_iq4_lookup && test_dev_layout_load(h));
    }
    if (emu_unpack && emu_dot && emu_row_bytes && emu_k_type && emu_iq4_lookup && emu_to_dev_layout) {
        static const int8_t kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
        int bad = 0;
        for (unsigned i = 0; i < 65536; i++) {
            const unsigned q = (i & 15) | (i >> 4 & 15) << 8 | (i >> 8 & 15) << 16 | (i >> 12 & 15) << 24;
            const unsigned want = (uint8_t)kv[i & 15] | (unsigned)(uint8_t)kv[i >> 4 & 15] << 8 | (unsigned)(uint8_t)kv[i >> 8 & 15] << 16 |
                                  (unsigned)(uint8_t)kv[i >> 12 & 15] << 24;
            bad += (unsigned)emu_iq4_lookup(q) != want;
        }
        CHECKF(bad == 0, "IQ4 lookup: %d of 65536 index patterns wrong", bad);
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            fflush(NULL);
            const pid_t pid = fork();
            if (pid == 0) {
                test_passed_ = test_failed_ = 0; /* this type's own counts */
                seed += 0x9E37u * (uint64_t)(t + 1);
                check_type(types[t]);
                printf("%-7s %d checks passed, %d failed\n", qk_get(types[t])->name, test_passed_, test_failed_);
                fflush(NULL);
                _exit(test_failed_ > 250 ? 250 : test_failed_);
            }
            int st = 0;
            CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
            CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: %s %d", qk_get(types[t])->name,
                   WIFEXITED(st) ? "failed checks:" : "killed by signal (a misaligned load traps):", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        }
    }
    emu_build_done(h);
    return test_summary();
}
