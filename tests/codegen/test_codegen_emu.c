/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/codegen/test_codegen_emu.c — the generated kernels' semantics without a GPU: each emitted
 * source (every kind, every autotune variant) is compiled by the host C++ compiler against
 * tests/codegen/emu/cuda_emu.h (threads as fibers, real barriers and warp shuffles, the same
 * device headers) and run on random inputs into NaN-poisoned outputs, then compared with the
 * plain-C reference ops: elementwise chains at NMSE 1e-10; norm / add+norm / GLU / plain
 * quantization: q8_K against the CPU reference quantizer (op_*_quant_row) and q8_1 against a host
 * copy of the CUDA q8_1 rule (d = amax/127, q = roundf(v/d), s = F16(sum)), dequantized at NMSE
 * 1e-10, with the number of differing bytes reported; the fused add's sum bit-exactly (also in
 * place). This is what catches indexing, broadcast, barrier and slot-order mistakes in CI; the
 * GPU's own numerics are test_cuda_codegen's job.
 * Runs from the repository root (ctest does). SKIPs (exit 77) without a host C++ compiler ($CXX or
 * c++).
 */
#include "codegen/cg.h"
#include "ops/ops_ref.h"
#include "quant/blocks.h"
#include "quant/fp16.h"
#include "base/status.h"
#include "test.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

static uint64_t seed = 0xE3E3E3;
static char tmp[64];
static const char *cxx;

static float *rnd(int64_t n, float scale) {
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = scale * test_rand_normal(&seed);
    return x;
}

static double nmse(const float *a, const float *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (a[i] != a[i]) return 1e30;
        num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

// ---- compiling a group's variants into one shared object ----

typedef int (*launch_fn)(unsigned grid, unsigned block, void **p, long long rows);

typedef struct emu_group {
    void *so;
    int nv;
    cg_variant v[CG_MAX_VARIANTS];
    launch_fn fn[CG_MAX_VARIANTS];
} emu_group;

static int n_so;

/* the group's bundle (cg_emit_bundle: every variant in its namespace) plus one launcher per variant */
static bool build(const cg_group *g, emu_group *eg, const char *what) {
    memset(eg, 0, sizeof *eg);
    eg->nv = cg_variants(g, eg->v);
    char cpp[128], so[128];
    snprintf(cpp, sizeof cpp, "%s/g%d.cpp", tmp, n_so);
    snprintf(so, sizeof so, "%s/g%d.so", tmp, n_so++);
    FILE *f = fopen(cpp, "w");
    if (!f) return false;
    char names[CG_MAX_VARIANTS][40], bundle[40], *src = NULL;
    if (cg_emit_bundle(g, eg->v, eg->nv, &src, bundle, names) != SB_OK) { /* the executor's source: every variant */
        fclose(f);
        CHECKF(0, "%s: emit: %s", what, sb_last_error());
        return false;
    }
    fputs(src, f);
    free(src);
    for (int k = 0; k < eg->nv; k++)
        fprintf(f, "extern \"C\" int sb_emu_launch_%d(unsigned grid, unsigned block, void **p, long long rows) {\n"
                   "    cgv%d::cg_params a;\n    memcpy(a.p, p, sizeof a.p);\n    a.rows = rows;\n"
                   "    return emu_run(grid, block, [&] { cgv%d::%s(a); });\n}\n",
                k, k, k, names[k]);
    fclose(f);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s -std=c++17 -O1 -w -ffp-contract=off -fPIC -shared -include tests/codegen/emu/cuda_emu.h -Itests/codegen/emu -Isrc %s -o %s",
             cxx, cpp, so);
    int rc = system(cmd);
    CHECKF(rc == 0, "%s: host compile failed: %s", what, cmd);
    if (rc) return false;
    eg->so = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    CHECKF(eg->so != NULL, "%s: dlopen: %s", what, dlerror());
    if (!eg->so) return false;
    for (int k = 0; k < eg->nv; k++) {
        char sym[64];
        snprintf(sym, sizeof sym, "sb_emu_launch_%d", k);
        *(void **)&eg->fn[k] = dlsym(eg->so, sym);
        CHECK(eg->fn[k] != NULL);
        if (!eg->fn[k]) return false;
    }
    return true;
}

static bool launch(const cg_group *g, emu_group *eg, int k, void **slots, const char *label) {
    unsigned grid, block;
    cg_geometry(g, eg->v[k], &grid, &block);
    int rc = eg->fn[k](grid, block, slots, g->rows);
    CHECKF(rc == 0, "%s: the emulated kernel deadlocked at a barrier", label);
    return rc == 0;
}

// ---- elementwise chains ----

typedef struct ew_case {
    const char *name;
    int64_t E, rows;
    int n;
    cg_step st[CG_MAX_STEPS];
} ew_case;

static void test_ew(const ew_case *tc) {
    const int64_t E = tc->E, R = tc->rows, n = E * R;
    cg_group g = {.kind = CG_EW, .E = E, .rows = R, .n_steps = tc->n, .n_params = 2};
    float *x = rnd(n, 1.5f), *ref = malloc((size_t)n * 4), *tmpv = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
    void *slots[CG_MAX_PARAMS] = {y, x};
    memcpy(ref, x, (size_t)n * 4);
    for (int k = 0; k < tc->n; k++) {
        g.st[k] = tc->st[k];
        const cg_step *s = &tc->st[k];
        if (s->op == CG_EW_ADD || s->op == CG_EW_MUL) {
            const int64_t on = s->bcast ? E : n;
            const int slot = g.n_params++;
            g.st[k].slot = slot;
            slots[slot] = rnd(on, 0.8f);
            if (s->op == CG_EW_ADD) op_add(tmpv, ref, slots[slot], n, on);
            else op_mul(tmpv, ref, slots[slot], n, on);
        } else if (s->op == CG_EW_SCALE) op_scale(tmpv, ref, n, s->f);
        else if (s->op == CG_EW_SOFTCAP) op_softcap(tmpv, ref, n, s->f);
        else if (s->op == CG_EW_SILU) op_silu(tmpv, ref, n);
        else if (s->op == CG_EW_GELU) op_gelu_tanh(tmpv, ref, n);
        else op_rms_norm(tmpv, ref, E, 0, R, s->f);
        memcpy(ref, tmpv, (size_t)n * 4);
    }
    char what[160];
    snprintf(what, sizeof what, "ew %s E=%lld rows=%lld", tc->name, (long long)E, (long long)R);
    emu_group eg;
    float *first = malloc((size_t)n * 4);
    if (build(&g, &eg, what))
        for (int k = 0; k < eg.nv; k++) {
            char label[200];
            snprintf(label, sizeof label, "%s [%d thr, %d rows/blk%s]", what, eg.v[k].threads, eg.v[k].rpb, eg.v[k].reg ? ", regs" : eg.v[k].flat ? ", flat" : "");
            memset(y, 0xFF, (size_t)n * 4); /* NaN */
            if (!launch(&g, &eg, k, slots, label)) continue;
            const double e = nmse(y, ref, n);
            printf("%-72s NMSE %.3e\n", label, e);
            CHECKF(e <= 1e-10, "%s: NMSE %.3e", label, e);
            if (k == 0) memcpy(first, y, (size_t)n * 4);
            else CHECKF(!memcmp(y, first, (size_t)n * 4), "%s: other bits than variant 0 (the autotuner's pick must not change a result)", label);
        }
    if (eg.so) dlclose(eg.so);
    free(first);
    for (int k = 2; k < CG_MAX_PARAMS; k++) free(slots[k]);
    free(x), free(ref), free(tmpv), free(y);
}

// ---- quantizers ----

/* the CUDA q8_1 rule (formats.md §3.2, k_quantize.cu q8_1_store) on the host */
static void q8_1_cuda(blk_q8_1 *b, const float *v, int64_t n) {
    for (int64_t k = 0; k < n / 32; k++) {
        float amax = 0.0f, sum = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(v[32 * k + i]));
        /* the warp sum's order: xor butterfly 16, 8, 4, 2, 1 */
        float s[32];
        for (int i = 0; i < 32; i++) s[i] = v[32 * k + i];
        for (int o = 16; o > 0; o >>= 1) {
            float t[32];
            for (int i = 0; i < 32; i++) t[i] = s[i] + s[i ^ o];
            memcpy(s, t, sizeof s);
        }
        sum = s[0];
        const float d = amax / 127.0f;
        for (int i = 0; i < 32; i++) b[k].qs[i] = (int8_t)(amax == 0.0f ? 0 : (int)roundf(v[32 * k + i] / d));
        b[k].d = qk_fp32_to_fp16(d);
        b[k].s = qk_fp32_to_fp16(sum);
    }
}

static void deq(float *y, const void *q, int xq, int64_t n) {
    if (xq == SB_TYPE_Q8_1) {
        const blk_q8_1 *b = q;
        for (int64_t i = 0; i < n; i++) y[i] = (float)b[i / 32].qs[i % 32] * qk_fp16_to_fp32(b[i / 32].d);
    } else {
        const blk_q8_K *b = q;
        for (int64_t i = 0; i < n; i++) y[i] = (float)b[i / 256].qs[i % 256] * b[i / 256].d;
    }
}

static void test_quant(cg_kind kind, int xq, int64_t E, int64_t R, bool flag, bool inplace) {
    const int64_t n = E * R;
    const float eps = 1e-6f;
    const uint64_t rb = op_row_bytes(xq, E);
    const size_t bytes = (size_t)(rb * (uint64_t)R);
    float *x = rnd(n, 2.0f), *x0 = malloc((size_t)n * 4), *b = rnd(n, 1.0f), *w = rnd(E, 1.0f);
    float *f32 = malloc((size_t)n * 4), *sum = malloc((size_t)n * 4), *sum_out = malloc((size_t)n * 4), *tmpv = malloc((size_t)E * 4);
    uint8_t *ref = malloc(bytes), *out = malloc(bytes);
    memcpy(x0, x, (size_t)n * 4);
    for (int64_t i = 0; i < n; i++) sum[i] = x[i] + b[i];
    cg_group g = {.kind = kind, .E = E, .rows = R, .xq = xq, .eps = eps};
    void *slots[CG_MAX_PARAMS] = {out, x};
    const float *src = x;
    char what[160];
    switch (kind) {
    case CG_QUANTIZE:
        g.n_params = 2;
        memcpy(f32, x, (size_t)n * 4);
        snprintf(what, sizeof what, "quantize %s E=%lld rows=%lld", ir_dtype_name(xq), (long long)E, (long long)R);
        break;
    case CG_RMS_NORM_QUANT:
        g.n_params = 3, g.has_w = flag, slots[2] = flag ? w : NULL;
        for (int64_t r = 0; r < R; r++) {
            op_rms_norm_row(f32 + r * E, x + r * E, E, eps);
            if (flag) op_mul(f32 + r * E, f32 + r * E, w, E, E);
        }
        snprintf(what, sizeof what, "rms_norm%s_quant %s E=%lld rows=%lld", flag ? "*w" : "", ir_dtype_name(xq), (long long)E, (long long)R);
        break;
    case CG_ADD_RMS_NORM_QUANT:
        g.n_params = 5, g.has_w = true, slots[2] = w, slots[3] = b, slots[4] = inplace ? (void *)x : (void *)sum_out;
        src = sum;
        for (int64_t r = 0; r < R; r++) {
            op_rms_norm_row(f32 + r * E, sum + r * E, E, eps);
            op_mul(f32 + r * E, f32 + r * E, w, E, E);
        }
        snprintf(what, sizeof what, "add+rms_norm*w_quant %s E=%lld rows=%lld%s", ir_dtype_name(xq), (long long)E, (long long)R,
                 inplace ? " (sum over x)" : "");
        break;
    case CG_GLU_QUANT:
        g.n_params = 3, g.gelu = flag, slots[2] = b;
        if (flag) op_geglu(f32, x, b, n);
        else op_swiglu(f32, x, b, n);
        snprintf(what, sizeof what, "%s_quant %s E=%lld rows=%lld", flag ? "geglu" : "swiglu", ir_dtype_name(xq), (long long)E, (long long)R);
        break;
    default: break;
    }
    /* the reference blocks */
    for (int64_t r = 0; r < R; r++) {
        uint8_t *d = ref + rb * (uint64_t)r;
        if (xq == SB_TYPE_Q8_1) q8_1_cuda((blk_q8_1 *)d, f32 + r * E, E);
        else if (kind == CG_QUANTIZE) op_quantize_row(d, xq, x + r * E, E);
        else if (kind == CG_GLU_QUANT) op_glu_quant_row(d, xq, x + r * E, b + r * E, E, flag, tmpv);
        else op_rms_norm_quant_row(d, xq, src + r * E, kind == CG_RMS_NORM_QUANT && !flag ? NULL : w, E, eps, tmpv);
    }
    float *y = malloc((size_t)n * 4), *yr = malloc((size_t)n * 4);
    deq(yr, ref, xq, n);
    /* the norm quantizers in both hand-written layouts their variants follow (registers with 256
     * threads, the 1024-thread loop); the other kinds once */
    const int layouts = kind == CG_RMS_NORM_QUANT || kind == CG_ADD_RMS_NORM_QUANT ? 2 : 1;
    uint8_t *first = malloc(bytes);
    for (int hr = 0; hr < layouts; hr++) {
        g.hand_reg = hr;
        emu_group eg;
        if (build(&g, &eg, what))
            for (int k = 0; k < eg.nv; k++) {
                char label[200];
                snprintf(label, sizeof label, "%s [%d thr, %d rows/blk%s]", what, eg.v[k].threads, eg.v[k].rpb, eg.v[k].reg ? ", regs" : eg.v[k].flat ? ", flat" : "");
                memcpy(x, x0, (size_t)n * 4); /* in place the previous launch overwrote it */
                memset(out, 0xFF, bytes);
                memset(sum_out, 0xFF, (size_t)n * 4);
                if (!launch(&g, &eg, k, slots, label)) continue;
                deq(y, out, xq, n);
                const double e = nmse(y, yr, n), ef = nmse(y, f32, n);
                size_t diff = 0;
                for (size_t i = 0; i < bytes; i++) diff += out[i] != ref[i];
                printf("%-72s NMSE %.3e vs reference blocks (%zu of %zu bytes differ), %.3e vs f32\n", label, e, diff, bytes, ef);
                CHECKF(e <= 1e-10, "%s: NMSE %.3e vs the reference blocks", label, e);
                CHECKF(ef <= 5e-4, "%s: NMSE %.3e vs f32", label, ef);
                if (kind == CG_ADD_RMS_NORM_QUANT)
                    CHECKF(!memcmp(inplace ? x : sum_out, sum, (size_t)n * 4), "%s: the written sum differs from x + b", label);
                if (k == 0) memcpy(first, out, bytes);
                else CHECKF(!memcmp(out, first, bytes), "%s: other bytes than variant 0 (the autotuner's pick must not change a result)", label);
            }
        if (eg.so) dlclose(eg.so);
    }
    free(first);
    free(x), free(x0), free(b), free(w), free(f32), free(sum), free(sum_out), free(tmpv), free(ref), free(out), free(y), free(yr);
}

int main(void) {
    cxx = test_host_cxx();
    if (!cxx) {
        printf("SKIP: no host C++ compiler ($CXX or c++) to run the emulated kernels\n");
        return 77;
    }
    char cmd[256];
    if (access("tests/codegen/emu/cuda_emu.h", R_OK) != 0 || access("src/backend/cuda/device/act_quant.cuh", R_OK) != 0) {
        printf("FAIL: run from the repository root (tests/codegen/emu, src/backend/cuda/device)\n");
        return 1;
    }
    snprintf(tmp, sizeof tmp, "/tmp/sb_codegen_emu.XXXXXX");
    if (!mkdtemp(tmp)) return 1;
    printf("seed %#llx, host compiler %s\n", (unsigned long long)seed, cxx);
    const ew_case ew[] = {
        {"add,rms,mul(b),softcap,gelu", 200, 3, 5, {{CG_EW_ADD, 0, 0, 0}, {CG_EW_RMS_NORM, 0, 0, 1e-6f}, {CG_EW_MUL, 0, 1, 0}, {CG_EW_SOFTCAP, 0, 0, 30.f}, {CG_EW_GELU, 0, 0, 0}}},
        {"scale,silu,add(b)", 100, 9, 3, {{CG_EW_SCALE, 0, 0, 0.125f}, {CG_EW_SILU, 0, 0, 0}, {CG_EW_ADD, 0, 1, 0}}},
        {"silu,mul,scale,rms", 512, 8, 4, {{CG_EW_SILU, 0, 0, 0}, {CG_EW_MUL, 0, 0, 0}, {CG_EW_SCALE, 0, 0, 0.5f}, {CG_EW_RMS_NORM, 0, 0, 1e-6f}}},
        {"rms,mul(b)", 1024, 1, 2, {{CG_EW_RMS_NORM, 0, 0, 1e-5f}, {CG_EW_MUL, 0, 1, 0}}},
        {"mul(b)", 96, 8, 1, {{CG_EW_MUL, 0, 1, 0}}},
    };
    for (size_t i = 0; i < sizeof ew / sizeof ew[0]; i++) test_ew(&ew[i]);
    const int xqs[2] = {SB_TYPE_Q8_1, SB_TYPE_Q8_K};
    for (int q = 0; q < 2; q++) {
        const int xq = xqs[q];
        test_quant(CG_QUANTIZE, xq, 512, 2, false, false);
        test_quant(CG_RMS_NORM_QUANT, xq, 512, 3, true, false);
        test_quant(CG_RMS_NORM_QUANT, xq, 256, 9, false, false);
        test_quant(CG_ADD_RMS_NORM_QUANT, xq, 512, 2, true, false);
        test_quant(CG_ADD_RMS_NORM_QUANT, xq, 256, 8, true, true);
        test_quant(CG_GLU_QUANT, xq, 768, 2, false, false);
        test_quant(CG_GLU_QUANT, xq, 256, 3, true, false);
        test_quant(CG_RMS_NORM_QUANT, xq, 33024, 1, true, false); /* too long for registers: quant_row's loop */
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmp);
    return test_summary();
}
