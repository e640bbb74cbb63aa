/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * base/threadpool.c — persistent workers, generation-counter dispatch, spin-then-futex waits.
 * Layer 0 (base). Protocol per tp_run:
 *   caller: write job fields, done = 0, job = gen' << 32 (open), gen = gen' (seq_cst), wake
 *           sleepers if any; run chunks itself; close the job (fetch_or), which returns how many
 *           workers joined; wait until done == joined (spin, then futex on `done`).
 *   worker: wait for gen != seen (spin, then futex on `gen`); join the job with a CAS on `job`
 *           unless it is closed or newer; if joined, run chunks, done++, wake the caller if it
 *           sleeps. A worker that did not join never reads the job fields.
 * So a worker the OS has not scheduled (2 shared cores) never delays tp_run: the caller takes
 * every chunk itself and returns.
 * The sleeper counters and the futex words are seq_cst so the "announce sleeping, re-check" /
 * "publish, check sleepers" pairs cannot both miss (Dekker). Linux futex only.
 * Non-goals: fairness between concurrent callers (one caller at a time), priorities.
 */
#include "base/threadpool.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TP_MAX_THREADS 256
#define TP_CLOSED (1ull << 31)
#define TP_SPIN_TICKS 100000 /* TSC ticks to spin before sleeping: ~30-50 µs */
#define TP_SPIN_ITERS 4000   /* the same budget where there is no TSC */

struct tp_pool {
    int n_threads;
    pthread_t *threads;                 /* n_threads - 1 workers */
    /* job, written by the caller before the gen bump */
    tp_range_fn fn;
    void *ctx;
    int64_t n, chunk;
    _Atomic int64_t next;               /* next chunk start */
    /* synchronisation */
    _Atomic uint32_t gen;               /* futex word: bumped once per job */
    _Atomic uint64_t job;               /* gen << 32 | TP_CLOSED | workers that joined this job */
    _Atomic uint32_t done;              /* futex word: joined workers finished with the current job */
    _Atomic int sleepers;               /* workers sleeping (or about to) on gen */
    _Atomic int caller_sleeping;        /* caller sleeping (or about to) on done */
    _Atomic int stop;
};

// ---- futex and spin helpers ----

static void futex_wait(_Atomic uint32_t *addr, uint32_t val) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr, int n) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* A spin budget: true while the current wait should keep spinning. */
typedef struct { uint64_t t0; int i; } spin_budget;

static inline uint64_t spin_clock(void) {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    return 0;
#endif
}

/* Every 256 pauses the spinner also yields: with more threads than free cores (a shared machine),
 * the thread it waits for may be runnable on this very core. */
static inline int spin_more(spin_budget *s) {
#if defined(__x86_64__) || defined(__i386__)
    if ((++s->i & 255) == 0) sched_yield();
    if ((s->i & 15) == 0) return spin_clock() - s->t0 < TP_SPIN_TICKS;
    return 1;
#else
    if ((++s->i & 255) == 0) sched_yield();
    return s->i < TP_SPIN_ITERS;
#endif
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

// ---- work ----

static void run_chunks(tp_pool *p, int tid) {
    for (;;) {
        int64_t b = atomic_fetch_add_explicit(&p->next, p->chunk, memory_order_relaxed);
        if (b >= p->n) break;
        int64_t e = b + p->chunk < p->n ? b + p->chunk : p->n;
        p->fn(p->ctx, b, e, tid);
    }
}

typedef struct { tp_pool *p; int tid; } worker_arg;

static void *worker_main(void *argp) {
    worker_arg a = *(worker_arg *)argp;
    free(argp);
    tp_pool *p = a.p;
    uint32_t seen = 0;
    for (;;) {
        uint32_t g = atomic_load_explicit(&p->gen, memory_order_acquire);
        spin_budget sb = {spin_clock(), 0};
        while (g == seen && spin_more(&sb)) {
            cpu_relax();
            g = atomic_load_explicit(&p->gen, memory_order_acquire);
        }
        if (g == seen) {
            atomic_fetch_add(&p->sleepers, 1);
            while ((g = atomic_load(&p->gen)) == seen) futex_wait(&p->gen, seen);
            atomic_fetch_sub(&p->sleepers, 1);
        }
        seen = g;
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
        /* join job g unless the caller already closed it (it finished every chunk without us) */
        uint64_t js = atomic_load(&p->job);
        bool joined = false;
        while ((uint32_t)(js >> 32) == g && !(js & TP_CLOSED))
            if (atomic_compare_exchange_weak(&p->job, &js, js + 1)) { joined = true; break; }
        if (!joined) continue;
        run_chunks(p, a.tid);
        atomic_fetch_add(&p->done, 1);
        if (atomic_load(&p->caller_sleeping)) futex_wake(&p->done, 1);
    }
    return NULL;
}

// ---- lifecycle ----

sb_status tp_create(int n_threads, tp_pool **out) {
    if (!out) return sb_fail(SB_ERR_INVALID_ARG, "tp_create: out is NULL");
    *out = NULL;
    if (n_threads < 1 || n_threads > TP_MAX_THREADS)
        return sb_fail(SB_ERR_INVALID_ARG, "tp_create: n_threads = %d, expected 1..%d", n_threads, TP_MAX_THREADS);
    tp_pool *p = calloc(1, sizeof *p);
    if (!p) return sb_fail(SB_ERR_OOM, "tp_create: %zu bytes", sizeof *p);
    p->n_threads = n_threads;
    if (n_threads > 1) {
        p->threads = calloc((size_t)(n_threads - 1), sizeof *p->threads);
        if (!p->threads) { free(p); return sb_fail(SB_ERR_OOM, "tp_create: thread table"); }
    }
    for (int t = 1; t < n_threads; t++) {
        worker_arg *a = malloc(sizeof *a);
        int rc = a ? 0 : ENOMEM;
        if (a) {
            a->p = p;
            a->tid = t;
            rc = pthread_create(&p->threads[t - 1], NULL, worker_main, a);
            if (rc) free(a);
        }
        if (rc) {
            p->n_threads = t; /* join the workers started so far */
            tp_free(p);
            return sb_fail(SB_ERR_OOM, "tp_create: pthread_create for thread %d of %d failed (errno %d)", t,
                           n_threads, rc);
        }
    }
    *out = p;
    return SB_OK;
}

void tp_free(tp_pool *p) {
    if (!p) return;
    if (p->n_threads > 1) {
        atomic_store(&p->stop, 1);
        atomic_fetch_add(&p->gen, 1);
        futex_wake(&p->gen, INT_MAX);
        for (int t = 1; t < p->n_threads; t++) pthread_join(p->threads[t - 1], NULL);
    }
    free(p->threads);
    free(p);
}

int tp_threads(const tp_pool *p) { return p ? p->n_threads : 1; }

// ---- dispatch ----

void tp_run(tp_pool *p, int64_t n, int64_t grain, tp_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (!p || p->n_threads == 1 || n <= grain) {
        fn(ctx, 0, n, 0);
        return;
    }
    /* ~4 chunks per thread: coarse enough for streaming, fine enough to absorb a delayed thread */
    int64_t nth = p->n_threads;
    int64_t chunk = (n + nth * 4 - 1) / (nth * 4);
    chunk = (chunk + grain - 1) / grain * grain;
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->chunk = chunk;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    const uint32_t g = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1;
    atomic_store(&p->job, (uint64_t)g << 32); /* open, nobody joined */
    atomic_store(&p->gen, g);                 /* seq_cst: publishes the job fields above */
    if (atomic_load(&p->sleepers) > 0) futex_wake(&p->gen, INT_MAX);
    run_chunks(p, 0);
    /* Close the job: workers that have not joined yet (descheduled by another process on a shared
     * machine) skip it, so the caller waits only for those that are running chunks. */
    const uint32_t want = (uint32_t)(atomic_fetch_or(&p->job, TP_CLOSED) & (TP_CLOSED - 1));
    uint32_t d = atomic_load_explicit(&p->done, memory_order_acquire);
    spin_budget sb = {spin_clock(), 0};
    while (d != want && spin_more(&sb)) {
        cpu_relax();
        d = atomic_load_explicit(&p->done, memory_order_acquire);
    }
    if (d != want) {
        atomic_store(&p->caller_sleeping, 1);
        while ((d = atomic_load(&p->done)) != want) futex_wait(&p->done, d);
        atomic_store(&p->caller_sleeping, 0);
    }
}
