/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cpu/cpu_kernels.c — argument checks, ISA selection and the threaded GEMV/GEMM driver
 * behind cpu_kernels.h.
 * Layer 0 (backend/cpu). The three ISA tables are merged once: avx512 entries fall back to avx2,
 * avx2 to scalar, so every ISA has every kernel.
 * GEMM schedule: the pool splits the N output rows (grain 4); a thread walks its rows in tiles of
 * CPU_ROW_TILE rows, and for each tile loops over the T activation rows in groups of CPU_MAX_NC,
 * so a tile of weights (<= ~44 KB) is decoded from cache, not DRAM, for every group after the
 * first, and each decoded block serves up to 4 tokens. T = 1 is the plain streaming GEMV.
 * T >= CPU_TILE_MIN_T goes to the decoded-tile GEMM (cpu_tile.inc) when the active ISA has an
 * instance for the weight type (avx512: all tile types; avx2: those that cannot saturate).
 * Non-goals: K-splitting (rows are long enough), repacked layouts, strided outputs.
 */
#include "cpu_kernels.h"
#include "cpu_impl.h"

#include "base/cpu_features.h"
#include "quant/fp16.h"
#include "quant/types.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define CPU_ROW_TILE 16

static cpu_kernel_table tables[3];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static _Atomic int active_isa = -1;

// ---- ISA selection ----

const char *cpu_isa_name(cpu_isa isa) {
    switch (isa) {
    case CPU_ISA_SCALAR: return "scalar";
    case CPU_ISA_AVX2: return "avx2";
    case CPU_ISA_AVX512: return "avx512";
    }
    return "?";
}

bool cpu_isa_available(cpu_isa isa) {
    switch (isa) {
    case CPU_ISA_SCALAR: return true;
    case CPU_ISA_AVX2: return sb_cpu_has_avx2_set();
    case CPU_ISA_AVX512: return sb_cpu_has_avx512_set() && sb_cpu_features_get()->avx512vnni;
    }
    return false;
}

float cpu_fp16_table[65536];

static void build_tables(void) {
    for (uint32_t h = 0; h < 65536; h++) cpu_fp16_table[h] = qk_fp16_to_fp32((uint16_t)h);
    cpu_fill_scalar(&tables[CPU_ISA_SCALAR]);
    tables[CPU_ISA_AVX2] = tables[CPU_ISA_SCALAR];
    cpu_fill_avx2(&tables[CPU_ISA_AVX2]);
    tables[CPU_ISA_AVX512] = tables[CPU_ISA_AVX2];
    cpu_fill_avx512(&tables[CPU_ISA_AVX512]);
}

cpu_isa cpu_isa_active(void) {
    int a = active_isa;
    if (a >= 0) return (cpu_isa)a;
    cpu_isa best = cpu_isa_available(CPU_ISA_AVX512) ? CPU_ISA_AVX512
                   : cpu_isa_available(CPU_ISA_AVX2) ? CPU_ISA_AVX2
                                                     : CPU_ISA_SCALAR;
    const char *env = getenv("SB_CPU_ISA");
    if (env) {
        for (int i = CPU_ISA_SCALAR; i <= CPU_ISA_AVX512; i++)
            if (strcmp(env, cpu_isa_name((cpu_isa)i)) == 0 && i < (int)best) best = (cpu_isa)i;
    }
    active_isa = (int)best;
    return best;
}

sb_status cpu_isa_set(cpu_isa isa) {
    if ((int)isa < CPU_ISA_SCALAR || (int)isa > CPU_ISA_AVX512)
        return sb_fail(SB_ERR_INVALID_ARG, "cpu_isa_set: isa %d is not a cpu_isa", (int)isa);
    if (!cpu_isa_available(isa))
        return sb_fail(SB_ERR_UNSUPPORTED, "cpu_isa_set: this CPU/OS cannot run %s kernels", cpu_isa_name(isa));
    active_isa = (int)isa;
    return SB_OK;
}

static const cpu_kernel_table *table(void) {
    pthread_once(&tables_once, build_tables);
    return &tables[cpu_isa_active()];
}

// ---- pairing ----

int cpu_act_type(int wtype) {
    switch (wtype) {
    case SB_TYPE_F32: case SB_TYPE_F16: case SB_TYPE_BF16: return SB_TYPE_F32;
    case SB_TYPE_Q4_0: case SB_TYPE_Q5_0: case SB_TYPE_Q8_0: case SB_TYPE_IQ4_NL: return SB_TYPE_Q8_0;
    case SB_TYPE_Q4_1: case SB_TYPE_Q5_1: return SB_TYPE_Q8_1;
    case SB_TYPE_Q2_K: case SB_TYPE_Q3_K: case SB_TYPE_Q4_K: case SB_TYPE_Q5_K: case SB_TYPE_Q6_K:
    case SB_TYPE_IQ4_XS: return SB_TYPE_Q8_K;
    default: return -1;
    }
}

/* Checks wtype and K, returns the weight and activation row sizes. */
static sb_status row_sizes(const char *fn, int wtype, int64_t K, size_t *wrow, size_t *arow) {
    int at = cpu_act_type(wtype);
    if (at < 0) {
        const qk_traits *tr = qk_get(wtype);
        return sb_fail(SB_ERR_UNSUPPORTED, "%s: weight type %d (%s) has no CPU kernel", fn, wtype,
                       tr && tr->name ? tr->name : "unknown");
    }
    const qk_traits *wt = qk_get(wtype), *ta = qk_get(at);
    if (K <= 0 || K % wt->blck || K % ta->blck)
        return sb_fail(SB_ERR_INVALID_ARG, "%s: K = %lld is not a positive multiple of %s's block %lld", fn,
                       (long long)K, wt->name, (long long)(wt->blck > ta->blck ? wt->blck : ta->blck));
    uint64_t wb, ab;
    if (qk_row_bytes(wtype, K, &wb) || qk_row_bytes(at, K, &ab) || wb > SIZE_MAX || ab > SIZE_MAX)
        return sb_fail(SB_ERR_RANGE, "%s: row of K = %lld %s elements overflows", fn, (long long)K, wt->name);
    if (wrow) *wrow = (size_t)wb;
    if (arow) *arow = (size_t)ab;
    return SB_OK;
}

sb_status cpu_act_row_bytes(int wtype, int64_t K, size_t *out) {
    if (!out) return sb_fail(SB_ERR_INVALID_ARG, "cpu_act_row_bytes: out is NULL");
    return row_sizes("cpu_act_row_bytes", wtype, K, NULL, out);
}

// ---- single calls ----

sb_status cpu_quantize_act(int act_type, const float *x, void *dst, int64_t n) {
    if (act_type != SB_TYPE_F32 && act_type != SB_TYPE_Q8_0 && act_type != SB_TYPE_Q8_1 && act_type != SB_TYPE_Q8_K)
        return sb_fail(SB_ERR_UNSUPPORTED, "cpu_quantize_act: activation type %d is not F32, Q8_0, Q8_1 or Q8_K",
                       act_type);
    const qk_traits *t = qk_get(act_type);
    if (n < 0 || n % t->blck)
        return sb_fail(SB_ERR_INVALID_ARG, "cpu_quantize_act: n = %lld is not a multiple of %s's block %lld",
                       (long long)n, t->name, (long long)t->blck);
    if (n == 0) return SB_OK;
    if (!x || !dst) return sb_fail(SB_ERR_INVALID_ARG, "cpu_quantize_act: NULL %s", x ? "dst" : "x");
    table()->quant[act_type](x, dst, n);
    return SB_OK;
}

sb_status cpu_vec_dot(int wtype, int64_t n, float *out, const void *w_row, const void *act_row) {
    SB_TRY(row_sizes("cpu_vec_dot", wtype, n, NULL, NULL));
    if (!out || !w_row || !act_row) return sb_fail(SB_ERR_INVALID_ARG, "cpu_vec_dot: NULL pointer argument");
    const cpu_kernel_table *t = table();
    if (t->gemv[wtype]) t->gemv[wtype](n, w_row, 0, 1, act_row, out);
    else t->dot[wtype](n, w_row, act_row, 0, 1, out, 0);
    return SB_OK;
}

// ---- GEMV / GEMM ----

typedef struct {
    cpu_dot_fn dot;
    cpu_dot2_fn dot2;
    cpu_gemv_fn gemv;
    const char *W, *act;
    size_t wrow, arow;
    int64_t K, N, T;
    float *out;
} mm_ctx;

static void mm_rows(void *vctx, int64_t r0, int64_t r1, int tid) {
    const mm_ctx *c = vctx;
    if (c->T == 1 && c->gemv) {
        c->gemv(c->K, c->W + r0 * c->wrow, c->wrow, r1 - r0, c->act, c->out + r0);
        return;
    }
    if (c->T == 1) {
        int64_t r = r0;
        if (c->dot2)
            for (; r + 2 <= r1; r += 2) c->dot2(c->K, c->W + r * c->wrow, c->W + (r + 1) * c->wrow, c->act, c->out + r);
        for (; r < r1; r++) c->dot(c->K, c->W + r * c->wrow, c->act, c->arow, 1, c->out + r, 0);
        return;
    }
    for (int64_t rb = r0; rb < r1; rb += CPU_ROW_TILE) {
        int64_t re = rb + CPU_ROW_TILE < r1 ? rb + CPU_ROW_TILE : r1;
        for (int64_t t = 0; t < c->T; t += CPU_MAX_NC) {
            int nc = c->T - t < CPU_MAX_NC ? (int)(c->T - t) : CPU_MAX_NC;
            const char *a = c->act + t * c->arow;
            float *o = c->out + t * c->N;
            for (int64_t r = rb; r < re; r++) c->dot(c->K, c->W + r * c->wrow, a, c->arow, nc, o + r, (size_t)c->N);
        }
    }
}

sb_status cpu_matmul(tp_pool *pool, int wtype, const void *W, int64_t K, int64_t N, const void *act, int64_t T,
                     float *out) {
    size_t wrow = 0, arow = 0;
    SB_TRY(row_sizes("cpu_matmul", wtype, K, &wrow, &arow));
    if (N <= 0 || T <= 0)
        return sb_fail(SB_ERR_INVALID_ARG, "cpu_matmul: N = %lld, T = %lld (both must be >= 1)", (long long)N,
                       (long long)T);
    if (!W || !act || !out) return sb_fail(SB_ERR_INVALID_ARG, "cpu_matmul: NULL pointer argument");
    if (T >= CPU_TILE_MIN_T) {
        cpu_isa isa = cpu_isa_active();
        if (isa == CPU_ISA_AVX512 && cpu_tile_supported_avx512(wtype))
            return cpu_tile_matmul_avx512(pool, wtype, cpu_act_type(wtype), W, wrow, K, N, act, arow, T, out);
        if (isa >= CPU_ISA_AVX2 && cpu_tile_supported_avx2(wtype))
            return cpu_tile_matmul_avx2(pool, wtype, cpu_act_type(wtype), W, wrow, K, N, act, arow, T, out);
    }
    mm_ctx c = {table()->dot[wtype], table()->dot2[wtype], table()->gemv[wtype], W, act, wrow, arow, K, N, T, out};
    tp_run(pool, N, 4, mm_rows, &c);
    return SB_OK;
}
