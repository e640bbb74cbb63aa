/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * base/cpu_features.h — what the running x86-64 CPU and OS can execute: AVX2, FMA, F16C, BMI2,
 * AVX-512 F/BW/VL/DQ/VNNI/BF16 and AVX-VNNI, read once with cpuid and checked against the OS's
 * saved register state (xgetbv XCR0), so an ISA is only reported usable when the kernel saves its
 * registers across context switches.
 * Layer 0 (base). Thread-safe: the first call fills a static struct; later calls read it.
 * Non-goals: non-x86 ISAs (all flags false there), cache topology, hybrid-core detection.
 * References: Intel SDM vol. 2A "CPUID" (leaf 1, leaf 7 subleaf 0/1), vol. 1 §13.3 (XCR0).
 */
#ifndef SB_BASE_CPU_FEATURES_H
#define SB_BASE_CPU_FEATURES_H

#include <stdbool.h>

typedef struct sb_cpu_features {
    bool sse42, avx, avx2, fma, f16c, bmi2;        /* avx/avx2/fma/f16c imply OS AVX state support */
    bool avx512f, avx512bw, avx512vl, avx512dq;     /* all imply OS opmask/ZMM state support */
    bool avx512vnni, avx512bf16, avx_vnni;
    bool os_avx;                                    /* XCR0 has SSE+AVX state (bits 1,2) */
    bool os_avx512;                                 /* XCR0 has opmask+ZMM state (bits 5,6,7) too */
} sb_cpu_features;

/* The features of this machine (never NULL). */
const sb_cpu_features *sb_cpu_features_get(void);

/* True when the CPU and OS can run the project's AVX2 kernels (AVX2 + FMA + F16C). */
bool sb_cpu_has_avx2_set(void);

/* True when the CPU and OS can run the project's AVX-512 kernels (F + BW + VL + DQ, plus the
 * AVX2 set). VNNI is reported separately. */
bool sb_cpu_has_avx512_set(void);

#endif
