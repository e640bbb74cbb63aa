/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cpu_geglu.c — cpu_geglu (the executor's GEGLU) gives op_geglu's bits (the
 * plain-C reference: ggml's fp16-table GELU) on every ISA this machine runs: every fp16 value, the
 * midpoints and quarter points between neighbours (round-to-nearest-even ties and both sides of
 * them, where a wrong fp16 rounding would pick the other table entry), the +-10 cut-offs and their
 * neighbours, +-inf, zeros and float subnormals, and fresh random normals of several scales, at
 * lengths that leave every tail length 0..7 for the scalar remainder.
 */
#include "backend/cpu/cpu_kernels.h"
#include "ops/ops_ref.h"
#include "quant/fp16.h"
#include "test.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static float fbits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t ubits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* n inputs g, multipliers u; cpu_geglu vs op_geglu at offsets 0..7 (so every tail length runs) */
static int64_t compare(const float *g, const float *u, int64_t n, float *want, float *got, const char *what) {
    int64_t bad = 0;
    for (int64_t off = 0; off < 8 && off < n; off++) {
        op_geglu(want, g + off, u + off, n - off);
        cpu_geglu(got, g + off, u + off, n - off, op_gelu_table());
        for (int64_t i = 0; i < n - off; i++)
            if (ubits(want[i]) != ubits(got[i])) {
                if (bad++ < 5)
                    printf("  %s (%s): g = %a: want %a, got %a\n", what, cpu_isa_name(cpu_isa_active()), g[off + i], want[i], got[i]);
            }
    }
    return bad;
}

int main(void) {
    enum { N = 65536 * 4 + 64 };
    float *g = malloc(N * sizeof *g), *u = malloc(N * sizeof *u), *want = malloc(N * sizeof *want), *got = malloc(N * sizeof *got);
    float *rg = malloc(N * sizeof *rg), *ru = malloc(N * sizeof *ru);
    uint64_t seed = (uint64_t)time(NULL) * 2654435761u + 1; /* fresh inputs every run; printed for a repeat */
    printf("seed %llu\n", (unsigned long long)seed);
    int64_t n = 0;
    for (uint32_t h = 0; h < 65536; h++) { /* every fp16, its midpoint and quarter points to the next */
        const float a = qk_fp16_to_fp32((uint16_t)h), b = qk_fp16_to_fp32((uint16_t)(h + 1));
        g[n++] = a;
        if (isfinite(a) && isfinite(b) && h != 0x7BFF && h != 0xFBFF && h != 0x7FFF) {
            g[n++] = 0.5f * a + 0.5f * b;
            g[n++] = fbits(ubits(0.5f * a + 0.5f * b) + 1);
            g[n++] = fbits(ubits(0.5f * a + 0.5f * b) - 1);
        }
    }
    const float edge[] = {10.0f, -10.0f, nextafterf(10.0f, 0), nextafterf(10.0f, 20), nextafterf(-10.0f, 0), nextafterf(-10.0f, -20),
                          INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-40f, 65504.0f, 65520.0f, 1e30f, -1e30f};
    for (size_t k = 0; k < sizeof edge / sizeof edge[0] && n < N; k++) g[n++] = edge[k];
    for (int64_t i = 0; i < n; i++) u[i] = 0.5f + test_rand_uniform(&seed);
    int ran = 0;
    for (int isa = CPU_ISA_SCALAR; isa <= CPU_ISA_AVX512; isa++) {
        if (cpu_isa_set((cpu_isa)isa) != SB_OK) continue;
        ran++;
        int64_t bad = compare(g, u, n, want, got, "grid");
        CHECKF(bad == 0, "%s: %lld of the %lld grid values differ from op_geglu", cpu_isa_name((cpu_isa)isa), (long long)bad, (long long)n);
        for (int rep = 0; rep < 4; rep++) { /* random normals of scale 0.1, 1, 4, 16 */
            const float sc = rep == 0 ? 0.1f : rep == 1 ? 1.0f : rep == 2 ? 4.0f : 16.0f;
            for (int64_t i = 0; i < 100003; i++) rg[i] = sc * test_rand_normal(&seed), ru[i] = test_rand_normal(&seed);
            bad = compare(rg, ru, 100003, want, got, "random");
            CHECKF(bad == 0, "%s: %lld random values (scale %g) differ", cpu_isa_name((cpu_isa)isa), (long long)bad, sc);
        }
    }
    CHECK(ran >= 1);
    free(g), free(u), free(want), free(got), free(rg), free(ru);
    return test_summary();
}
