/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * codegen/shim/stddef.h — the <stddef.h> NVRTC sees: size_t, ptrdiff_t, NULL, offsetof.
 * Layer 3 (codegen), embedded as an in-memory NVRTC header; never on a host include path.
 */
#ifndef SB_NVRTC_STDDEF_H
#define SB_NVRTC_STDDEF_H
typedef unsigned long size_t;
typedef long ptrdiff_t;
#ifndef NULL
#define NULL 0
#endif
#define offsetof(t, m) __builtin_offsetof(t, m)
#endif
