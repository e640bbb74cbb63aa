/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/base/test_threadpool.c — tp_run covers [0, n) exactly once per call, with chunk starts on
 * grain multiples and valid thread ids, for 1..4 threads, many back-to-back dispatches (the decode
 * pattern), sizes below/at/above the grain, a NULL pool, dispatches after the workers fell asleep,
 * and bad arguments. Also the cpu feature probe's internal consistency.
 */
#include "base/threadpool.h"
#include "base/cpu_features.h"
#include "test.h"

#include <stdatomic.h>
#include <time.h>

typedef struct {
    _Atomic int *hits;
    int64_t grain;
    int n_threads;
    _Atomic int bad;
    _Atomic int64_t sum;
} job;

static void count_fn(void *vctx, int64_t b, int64_t e, int tid) {
    job *j = vctx;
    if (b % j->grain != 0 || b >= e || tid < 0 || tid >= j->n_threads) atomic_fetch_add(&j->bad, 1);
    for (int64_t i = b; i < e; i++) atomic_fetch_add_explicit(&j->hits[i], 1, memory_order_relaxed);
    atomic_fetch_add(&j->sum, e - b);
}

static int run_case(tp_pool *p, int n_threads, int64_t n, int64_t grain, int iters) {
    _Atomic int *hits = calloc((size_t)(n > 0 ? n : 1), sizeof *hits);
    job j = {.hits = hits, .grain = grain, .n_threads = n_threads};
    for (int it = 0; it < iters; it++) tp_run(p, n, grain, count_fn, &j);
    int ok = atomic_load(&j.bad) == 0 && atomic_load(&j.sum) == (n > 0 ? n : 0) * iters;
    for (int64_t i = 0; i < n; i++) ok &= atomic_load(&hits[i]) == iters;
    free(hits);
    return ok;
}

int main(void) {
    tp_pool *p = (tp_pool *)1;
    CHECK(tp_create(0, &p) == SB_ERR_INVALID_ARG && p == NULL);
    CHECK(tp_create(257, &p) == SB_ERR_INVALID_ARG);
    CHECK(tp_create(2, NULL) == SB_ERR_INVALID_ARG);
    tp_free(NULL);
    CHECK(tp_threads(NULL) == 1);
    CHECKF(run_case(NULL, 1, 1000, 7, 3), "NULL pool");

    for (int nt = 1; nt <= 4; nt++) {
        CHECK(tp_create(nt, &p) == SB_OK && p != NULL);
        CHECK_EQ_INT(tp_threads(p), nt);
        const int64_t sizes[] = {0, 1, 2, 3, 5, 16, 17, 100, 896, 4864, 100003};
        const int64_t grains[] = {1, 4, 16, 64};
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
            for (size_t gi = 0; gi < sizeof grains / sizeof *grains; gi++) {
                int iters = sizes[si] > 10000 ? 20 : 200;
                CHECKF(run_case(p, nt, sizes[si], grains[gi], iters), "threads %d n %lld grain %lld", nt,
                       (long long)sizes[si], (long long)grains[gi]);
            }
        /* many tiny back-to-back dispatches, the decode-step pattern */
        CHECKF(run_case(p, nt, 64, 1, 20000), "threads %d: 20000 small dispatches", nt);
        /* let the workers go to sleep on the futex, then dispatch again */
        struct timespec ts = {0, 5 * 1000 * 1000};
        for (int k = 0; k < 3; k++) {
            nanosleep(&ts, NULL);
            CHECKF(run_case(p, nt, 1000, 8, 1), "threads %d: dispatch after sleep %d", nt, k);
        }
        tp_free(p);
    }

    const sb_cpu_features *f = sb_cpu_features_get();
    CHECK(f == sb_cpu_features_get());
    CHECK(!f->avx2 || f->avx);
    CHECK(!f->avx512f || (f->os_avx512 && f->avx));
    CHECK(!sb_cpu_has_avx512_set() || sb_cpu_has_avx2_set());
    printf("cpu: avx2 %d fma %d f16c %d avx512f %d bw %d vl %d vnni %d avx_vnni %d\n", f->avx2, f->fma, f->f16c,
           f->avx512f, f->avx512bw, f->avx512vl, f->avx512vnni, f->avx_vnni);
    return test_summary();
}
