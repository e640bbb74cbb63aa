/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/cu_blaslt.c — cuBLASLt through dlopen (cu_blaslt.h): the library, its handle, and
 * one GEMM call with a per-shape cache of the heuristic's algorithm.
 * Layer 0 (backend/cuda). Column-major view of the row-major operands: W [N, K] is a K x N matrix
 * (ld K) taken transposed (transa T), X [T, K] a K x T matrix (ld K), D [T, ldd] an N x T matrix
 * (ld ldd): D = W^T-of-that X, which is y[t, n] = sum_k x[t, k] w[n, k] with no transpose copy.
 */
#include "backend/cuda/cu_blaslt.h"

#include "base/status.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

// ---- the few cuBLASLt types and values used (cublasLt.h, cublas_api.h, library_types.h) ----

typedef int lt_status;                       /* cublasStatus_t: 0 = CUBLAS_STATUS_SUCCESS */
typedef void *lt_handle, *lt_desc, *lt_layout, *lt_pref;
typedef struct lt_algo { uint64_t data[8]; } lt_algo; /* cublasLtMatmulAlgo_t */
typedef struct lt_heur {                    /* cublasLtMatmulHeuristicResult_t */
    lt_algo algo;
    size_t workspace_size;
    lt_status state;
    float waves;
    int reserved[4];
} lt_heur;

enum {
    LT_COMPUTE_32F = 68,                     /* CUBLAS_COMPUTE_32F */
    LT_R_32F = 0, LT_R_16F = 2, LT_R_16BF = 14, /* cudaDataType */
    LT_OP_N = 0, LT_OP_T = 1,                /* cublasOperation_t */
    LT_DESC_TRANSA = 3, LT_DESC_TRANSB = 4,  /* cublasLtMatmulDescAttributes_t */
    LT_PREF_MAX_WORKSPACE_BYTES = 1,         /* cublasLtMatmulPreferenceAttributes_t */
    LT_PREF_MIN_ALIGNMENT_A = 5,             /* ... the B, C, D ones follow (uint32_t bytes, default 256) */
};

static struct {
    void *lib;
    lt_handle h;
    lt_status (*create)(lt_handle *);
    lt_status (*desc_create)(lt_desc *, int compute, int scale_type);
    lt_status (*desc_destroy)(lt_desc);
    lt_status (*desc_set)(lt_desc, int attr, const void *buf, size_t bytes);
    lt_status (*layout_create)(lt_layout *, int type, uint64_t rows, uint64_t cols, int64_t ld);
    lt_status (*layout_destroy)(lt_layout);
    lt_status (*pref_create)(lt_pref *);
    lt_status (*pref_destroy)(lt_pref);
    lt_status (*pref_set)(lt_pref, int attr, const void *buf, size_t bytes);
    lt_status (*heuristic)(lt_handle, lt_desc, lt_layout a, lt_layout b, lt_layout c, lt_layout d, lt_pref, int requested, lt_heur *,
                           int *returned);
    lt_status (*matmul)(lt_handle, lt_desc, const void *alpha, const void *a, lt_layout, const void *b, lt_layout, const void *beta,
                        const void *c, lt_layout, void *d, lt_layout, const lt_algo *, void *ws, size_t ws_bytes, cu_stream);
    const char *(*status_name)(lt_status);
    bool ok;
    char why[256];
} lt;

static pthread_once_t lt_once = PTHREAD_ONCE_INIT;
static int lt_assumed = -1;

static void *lt_sym(const char *name) {
    void *f = dlsym(lt.lib, name);
    if (!f && !lt.why[0]) snprintf(lt.why, sizeof lt.why, "cublasLt: no symbol %s", name);
    return f;
}

static void lt_load(void) {
    static const char *names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !lt.lib; i++) lt.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lt.lib) {
        const char *e = dlerror();
        snprintf(lt.why, sizeof lt.why, "cublasLt: not loaded (%s)", e ? e : "no libcublasLt.so.13/.12/.so");
        return;
    }
    *(void **)&lt.create = lt_sym("cublasLtCreate");
    *(void **)&lt.desc_create = lt_sym("cublasLtMatmulDescCreate");
    *(void **)&lt.desc_destroy = lt_sym("cublasLtMatmulDescDestroy");
    *(void **)&lt.desc_set = lt_sym("cublasLtMatmulDescSetAttribute");
    *(void **)&lt.layout_create = lt_sym("cublasLtMatrixLayoutCreate");
    *(void **)&lt.layout_destroy = lt_sym("cublasLtMatrixLayoutDestroy");
    *(void **)&lt.pref_create = lt_sym("cublasLtMatmulPreferenceCreate");
    *(void **)&lt.pref_destroy = lt_sym("cublasLtMatmulPreferenceDestroy");
    *(void **)&lt.pref_set = lt_sym("cublasLtMatmulPreferenceSetAttribute");
    *(void **)&lt.heuristic = lt_sym("cublasLtMatmulAlgoGetHeuristic");
    *(void **)&lt.matmul = lt_sym("cublasLtMatmul");
    *(void **)&lt.status_name = dlsym(lt.lib, "cublasLtGetStatusName"); /* optional: error text only */
    if (lt.why[0]) return;
    const lt_status st = lt.create(&lt.h);
    if (st != 0) {
        snprintf(lt.why, sizeof lt.why, "cublasLt: cublasLtCreate failed (status %d)", st);
        return;
    }
    lt.ok = true; /* the handle lives as long as the process (one device; non-goals) */
}

bool cu_blaslt_available(char *why, size_t cap) {
    if (lt_assumed >= 0) {
        if (why && cap) snprintf(why, cap, "%s", lt_assumed ? "" : "cublasLt: assumed absent (a planning test)");
        return lt_assumed == 1;
    }
    pthread_once(&lt_once, lt_load);
    if (why && cap) snprintf(why, cap, "%s", lt.ok ? "" : lt.why);
    return lt.ok;
}

void cu_blaslt_assume(int on) { lt_assumed = on < 0 ? -1 : on ? 1 : 0; }

// ---- the heuristic's algorithm per shape ----

typedef struct algo_entry {
    int64_t K, N, T, ldd;
    int htype, beta, used;
    uint32_t align[4]; /* of A, B, C, D: the heuristic picks among algorithms that take these */
    lt_algo algo;
} algo_entry;

#define ALGO_CACHE 128
static algo_entry algo_cache[ALGO_CACHE];
static int algo_next;
static pthread_mutex_t algo_mu = PTHREAD_MUTEX_INITIALIZER;

static bool algo_find(const algo_entry *key, lt_algo *out) {
    bool hit = false;
    pthread_mutex_lock(&algo_mu);
    for (int i = 0; i < ALGO_CACHE && !hit; i++) {
        const algo_entry *e = &algo_cache[i];
        if (e->used && e->K == key->K && e->N == key->N && e->T == key->T && e->ldd == key->ldd && e->htype == key->htype &&
            e->beta == key->beta && !memcmp(e->align, key->align, sizeof e->align)) {
            *out = e->algo;
            hit = true;
        }
    }
    pthread_mutex_unlock(&algo_mu);
    return hit;
}

static void algo_keep(const algo_entry *e) {
    pthread_mutex_lock(&algo_mu);
    algo_cache[algo_next] = *e;
    algo_cache[algo_next].used = 1;
    algo_next = (algo_next + 1) % ALGO_CACHE;
    pthread_mutex_unlock(&algo_mu);
}

// ---- the GEMM ----

static sb_status lt_fail(const char *what, lt_status st) {
    return sb_fail(SB_ERR_DEVICE, "cublasLt: %s failed (%s, status %d)", what, lt.status_name ? lt.status_name(st) : "?", st);
}

typedef struct lt_call {
    lt_desc desc;
    lt_layout a, b, d;
    lt_pref pref;
} lt_call;

static void call_free(lt_call *c) {
    if (c->pref) lt.pref_destroy(c->pref);
    if (c->d) lt.layout_destroy(c->d);
    if (c->b) lt.layout_destroy(c->b);
    if (c->a) lt.layout_destroy(c->a);
    if (c->desc) lt.desc_destroy(c->desc);
}

/* the alignment of a pointer in bytes, at most 256 (the preference's default, which the arena's
 * 64-byte offsets do not promise) */
static uint32_t align_of(const void *p) {
    const uintptr_t a = (uintptr_t)p;
    uint32_t b = 256;
    while (b > 1 && a % b) b /= 2;
    return b;
}

/* the descriptors of one call (host objects only) */
static sb_status call_make(lt_call *c, int ht, int64_t K, int64_t N, int64_t T, int64_t ldd, const uint32_t *align) {
    const int32_t ta = LT_OP_T, tb = LT_OP_N;
    const size_t ws = CU_BLASLT_WORKSPACE;
    lt_status st;
    if ((st = lt.desc_create(&c->desc, LT_COMPUTE_32F, LT_R_32F))) return lt_fail("cublasLtMatmulDescCreate", st);
    if ((st = lt.desc_set(c->desc, LT_DESC_TRANSA, &ta, sizeof ta))) return lt_fail("transa", st);
    if ((st = lt.desc_set(c->desc, LT_DESC_TRANSB, &tb, sizeof tb))) return lt_fail("transb", st);
    if ((st = lt.layout_create(&c->a, ht, (uint64_t)K, (uint64_t)N, K))) return lt_fail("layout of W", st);
    if ((st = lt.layout_create(&c->b, ht, (uint64_t)K, (uint64_t)T, K))) return lt_fail("layout of x", st);
    if ((st = lt.layout_create(&c->d, LT_R_32F, (uint64_t)N, (uint64_t)T, ldd))) return lt_fail("layout of y", st);
    if ((st = lt.pref_create(&c->pref))) return lt_fail("cublasLtMatmulPreferenceCreate", st);
    if ((st = lt.pref_set(c->pref, LT_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws))) return lt_fail("workspace preference", st);
    for (int i = 0; i < 4; i++)
        if ((st = lt.pref_set(c->pref, LT_PREF_MIN_ALIGNMENT_A + i, &align[i], sizeof align[i]))) return lt_fail("alignment preference", st);
    return SB_OK;
}

sb_status cu_blaslt_gemm(cu_stream s, float *d, int64_t ldd, const void *w, const void *x, int htype, int64_t K, int64_t N, int64_t T,
                         const float *c, void *workspace) {
    if (!cu_blaslt_available(NULL, 0) || !lt.ok) return sb_fail(SB_ERR_UNSUPPORTED, "cublasLt: not available");
    if (htype != SB_TYPE_F16 && htype != SB_TYPE_BF16) return sb_fail(SB_ERR_UNSUPPORTED, "cublasLt: operands of type %d", htype);
    if (K < 1 || N < 1 || T < 1 || ldd < N) return sb_fail(SB_ERR_INVALID_ARG, "cublasLt: GEMM of K %lld, N %lld, T %lld, ldd %lld",
                                                       (long long)K, (long long)N, (long long)T, (long long)ldd);
    const int ht = htype == SB_TYPE_F16 ? LT_R_16F : LT_R_16BF;
    lt_call call = {0};
    const algo_entry key = {.K = K, .N = N, .T = T, .ldd = ldd, .htype = htype, .beta = c != NULL,
                            .align = {align_of(w), align_of(x), align_of(c ? (const void *)c : (const void *)d), align_of(d)}};
    sb_status r = call_make(&call, ht, K, N, T, ldd, key.align);
    lt_algo algo;
    if (r == SB_OK && !algo_find(&key, &algo)) {
        lt_heur h;
        int got = 0;
        const lt_status st = lt.heuristic(lt.h, call.desc, call.a, call.b, call.d, call.d, call.pref, 1, &h, &got);
        if (st) r = lt_fail("cublasLtMatmulAlgoGetHeuristic", st);
        else if (got < 1) r = sb_fail(SB_ERR_UNSUPPORTED, "cublasLt: no algorithm for K %lld, N %lld, T %lld", (long long)K, (long long)N,
                                      (long long)T);
        else {
            algo_entry e = key;
            e.algo = algo = h.algo;
            algo_keep(&e);
        }
    }
    if (r == SB_OK) {
        const float one = 1.0f, beta = c ? 1.0f : 0.0f;
        const lt_status st = lt.matmul(lt.h, call.desc, &one, w, call.a, x, call.b, &beta, c ? (const void *)c : (const void *)d, call.d, d,
                                       call.d, &algo, workspace, CU_BLASLT_WORKSPACE, s);
        if (st) r = lt_fail("cublasLtMatmul", st);
    }
    call_free(&call);
    return r;
}
