/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * base/cpu_features.c — cpuid/xgetbv probing behind base/cpu_features.h.
 * Layer 0 (base). A CPU flag counts only when XCR0 says the OS saves the matching register state
 * (a hypervisor may expose AVX-512 in cpuid yet not enable ZMM state).
 * Invariants: probing is idempotent and race-free (pthread_once).
 * Non-goals: non-x86 targets (every flag false), microarchitecture tuning tables.
 */
#include "base/cpu_features.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#  include <cpuid.h>
#endif

static sb_cpu_features feats;
static pthread_once_t feats_once = PTHREAD_ONCE_INIT;

// ---- probing ----

#if defined(__x86_64__) || defined(__i386__)
static unsigned long long read_xcr0(void) {
    unsigned int lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

static void probe(void) {
    unsigned int a, b, c, d;
    memset(&feats, 0, sizeof feats);
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    unsigned int max_leaf = a;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    bool osxsave = (c >> 27) & 1, cpu_avx = (c >> 28) & 1;
    bool cpu_fma = (c >> 12) & 1, cpu_f16c = (c >> 29) & 1;
    feats.sse42 = (c >> 20) & 1;
    unsigned long long xcr0 = osxsave ? read_xcr0() : 0;
    feats.os_avx = (xcr0 & 0x6) == 0x6;
    feats.os_avx512 = feats.os_avx && (xcr0 & 0xE0) == 0xE0;
    feats.avx = cpu_avx && feats.os_avx;
    feats.fma = cpu_fma && feats.avx;
    feats.f16c = cpu_f16c && feats.avx;
    if (max_leaf < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    unsigned int max_sub7 = a;
    feats.avx2 = ((b >> 5) & 1) && feats.avx;
    feats.bmi2 = (b >> 8) & 1;
    bool z = feats.os_avx512;
    feats.avx512f = ((b >> 16) & 1) && z;
    feats.avx512dq = ((b >> 17) & 1) && feats.avx512f;
    feats.avx512bw = ((b >> 30) & 1) && feats.avx512f;
    feats.avx512vl = ((b >> 31) & 1) && feats.avx512f;
    feats.avx512vnni = ((c >> 11) & 1) && feats.avx512f;
    if (max_sub7 >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        feats.avx_vnni = ((a >> 4) & 1) && feats.avx2;
        feats.avx512bf16 = ((a >> 5) & 1) && feats.avx512f;
    }
}
#else
static void probe(void) { memset(&feats, 0, sizeof feats); }
#endif

// ---- queries ----

const sb_cpu_features *sb_cpu_features_get(void) {
    pthread_once(&feats_once, probe);
    return &feats;
}

bool sb_cpu_has_avx2_set(void) {
    const sb_cpu_features *f = sb_cpu_features_get();
    return f->avx2 && f->fma && f->f16c;
}

bool sb_cpu_has_avx512_set(void) {
    const sb_cpu_features *f = sb_cpu_features_get();
    return sb_cpu_has_avx2_set() && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq;
}
