/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/quant/test_register.c — the converter columns are filled exactly once and safely when many
 * threads race to the first qk_get(): every thread must see complete converters (run under TSan
 * to check the synchronisation itself). Must be the first use of the table in this process.
 */
#include "quant/quant.h"
#include "test.h"

#include <pthread.h>

#define N_THREADS 8

static pthread_barrier_t start;
static int seen_ok[N_THREADS];

static void *worker(void *arg) {
    const int id = (int)(intptr_t)arg;
    pthread_barrier_wait(&start);
    const int types[] = {SB_TYPE_Q4_K, SB_TYPE_Q8_0, SB_TYPE_IQ4_XS, SB_TYPE_BF16, SB_TYPE_Q6_K};
    int ok = 1;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const qk_traits *t = qk_get(types[(i + (size_t)id) % 5]);
        ok &= t && t->to_float && t->from_float_ref;
    }
    ok &= qk_get(SB_TYPE_Q4_1)->vec_dot_type == SB_TYPE_Q8_1;
    seen_ok[id] = ok;
    return NULL;
}

int main(void) {
    pthread_t th[N_THREADS];
    pthread_barrier_init(&start, NULL, N_THREADS);
    for (int i = 0; i < N_THREADS; i++) pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < N_THREADS; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < N_THREADS; i++) CHECKF(seen_ok[i], "thread %d saw incomplete traits", i);
    /* later calls keep returning the same, complete table */
    CHECK(qk_get(SB_TYPE_Q4_K) == qk_get(SB_TYPE_Q4_K));
    CHECK(qk_get(SB_TYPE_Q4_K)->to_float == qk_dequantize_row_q4_K);
    return test_summary();
}
