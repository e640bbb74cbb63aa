/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * codegen/shim/stdint.h — the <stdint.h> NVRTC sees (NVRTC ships no C library headers): the
 * fixed-width types the device headers use, with the LP64 widths of the host compiler.
 * Layer 3 (codegen), embedded as an in-memory NVRTC header; never on a host include path.
 */
#ifndef SB_NVRTC_STDINT_H
#define SB_NVRTC_STDINT_H
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef long long intptr_t;
typedef unsigned long long uintptr_t;
#define INT32_MAX 2147483647
#define INT64_MAX 9223372036854775807LL
#define UINT32_MAX 4294967295u
#define UINT64_MAX 18446744073709551615ULL
#endif
