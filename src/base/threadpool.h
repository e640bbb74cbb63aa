/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * base/threadpool.h — a persistent pthread pool for parallel-for over index ranges.
 * Layer 0 (base). A pool of n threads = the calling thread + (n-1) workers created once in
 * tp_create; tp_run never creates threads. Dispatch is one atomic generation bump; workers spin
 * briefly (~tens of µs) on it and then sleep on a futex, so back-to-back dispatches (hundreds per
 * decode step) cost ~1 µs while an idle pool burns no CPU.
 * Invariants: tp_run returns only after every index in [0, n) was processed exactly once; fn runs
 * concurrently on disjoint ranges; one thread at a time may call tp_run on a pool (not reentrant:
 * fn must not call tp_run on the same pool).
 * Scheduling: [0, n) is cut into chunks (multiples of `grain`), handed out by an atomic counter,
 * so a thread that the OS delays (2 shared cores) does not hold the others up; a worker that has
 * not joined a job by the time the caller ran out of chunks skips it (the caller never waits for
 * a thread that is not running). So which tid runs which range is not fixed.
 * Non-goals: task graphs, work stealing across calls, pinning, non-Linux sleeping (futex).
 */
#ifndef SB_BASE_THREADPOOL_H
#define SB_BASE_THREADPOOL_H

#include "base/status.h"

#include <stdint.h>

typedef struct tp_pool tp_pool;

/* Work on indices [begin, end); tid in [0, n_threads) identifies the executing thread (0 = the
 * caller of tp_run), e.g. to pick a per-thread scratch buffer. */
typedef void (*tp_range_fn)(void *ctx, int64_t begin, int64_t end, int tid);

/* Create a pool of n_threads (1..256) threads in total, the caller included. */
sb_status tp_create(int n_threads, tp_pool **out);

/* Stop and join the workers; NULL is a no-op. */
void tp_free(tp_pool *pool);

/* Threads in the pool (the caller included); 1 for a NULL pool. */
int tp_threads(const tp_pool *pool);

/* Run fn over [0, n) split into chunks whose starts are multiples of grain (grain >= 1); a chunk
 * is never split below grain except for the tail. pool may be NULL (runs inline). n <= 0 returns
 * at once. */
void tp_run(tp_pool *pool, int64_t n, int64_t grain, tp_range_fn fn, void *ctx);

#endif
