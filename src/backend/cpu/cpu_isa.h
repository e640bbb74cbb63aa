/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cpu/cpu_isa.h — scope an instruction set to the rest of one .c file, so the rest of the
 * build stays portable: CPU_ISA_BEGIN(CPU_ISA_AVX2 or CPU_ISA_AVX512) after the file's includes
 * (headers are included first so they are not affected), CPU_ISA_END at its end. GCC takes a
 * target pragma (to the end of the file); clang an attribute push applied to every function
 * defined in between, popped by CPU_ISA_END. Private to backend/cpu.
 */
#ifndef SB_BACKEND_CPU_ISA_H
#define SB_BACKEND_CPU_ISA_H

#define CPU_ISA_AVX2 "avx2,fma,f16c,bmi2"
#define CPU_ISA_AVX512 "avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"

#define CPU_ISA_PRAGMA_(x) _Pragma(#x)
#if defined(__clang__)
#define CPU_ISA_BEGIN(isa) CPU_ISA_PRAGMA_(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define CPU_ISA_END CPU_ISA_PRAGMA_(clang attribute pop)
#else
#define CPU_ISA_BEGIN(isa) CPU_ISA_PRAGMA_(GCC target(isa))
#define CPU_ISA_END
#endif

#endif
