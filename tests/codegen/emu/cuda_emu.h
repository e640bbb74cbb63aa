/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/codegen/emu/cuda_emu.h — just enough CUDA to run a generated kernel on the CPU (g++), for
 * codegen/test_codegen_emu: every thread of a block is a fiber; __syncthreads waits for
 * the block, __shfl_xor_sync for the warp (deposit, wait, read, wait), blocks run one after
 * another; after every block barrier one random warp is held back until no other thread can
 * move (so warps drift apart and shared-memory races between them change results). __shared__ is `static` (fibers share one OS thread). Math: the host's libm, fp16 by
 * _Float16 (round to nearest even, as cvt.rn.f16.f32), __float2int_rn by lrintf.
 * Force-included (-include) before the generated source; the test appends sb_emu_launch.
 * Integer intrinsics (__dp4a, __funnelshift_rc, __byte_perm) and CUDA's aligned vector types serve
 * the hand-written kernels' device headers (tests/runtime/test_cuda_unpack_emu).
 * Dynamic shared memory (extern __shared__) is emu_dsmem, refilled with 0xFF (f16 / f32 NaN) before
 * every block: the device code names it through a macro (backend/cuda/device/fattn_mma.cuh).
 * Non-goals: speed, atomics, PDL (CU_PDL_ENTRY is a no-op without __CUDA_ARCH__).
 * Whole k_*.cu files (their host launchers too) run through tests/codegen/emu/cuda_runtime.h.
 */
#ifndef SB_CUDA_EMU_H
#define SB_CUDA_EMU_H

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <ucontext.h>
#include <vector>

#include "cuda_fp16.h" /* tests/codegen/emu's: the conversions the MMA emulation needs too */

using std::isfinite; /* CUDA device code calls the math classifiers unqualified */
using std::isinf;
using std::isnan;

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __constant__
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {} /* CUDA's dim3(x [, y [, z]]) */
};
static dim3 threadIdx, blockIdx, blockDim, gridDim;

static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
static inline int __float2int_rn(float f) { return (int)lrintf(f); }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
#define __ldcg(p) (*(p))
static inline int min(int a, int b) { return a < b ? a : b; } /* CUDA's integer min / max */
static inline int max(int a, int b) { return a > b ? a : b; }
static inline void __threadfence() {}
template <class T> static inline T atomicAdd(T *p, T v) { /* blocks run one after another, threads on one OS thread */
    const T o = *p;
    *p = o + v;
    return o;
}

// ---- integer intrinsics (the hand-written kernels' device headers: tests/runtime/cuda_unpack_emu.cc) ----

/* vector types with CUDA's alignment, so -fsanitize=alignment sees what the device would fault on */
struct alignas(8) uint2 {
    unsigned x, y;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(16) int4 {
    int x, y, z, w;
};
struct alignas(8) float2 {
    float x, y;
};
static inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline float2 __half22float2(__half2 h) { return float2{__half2float(h.x), __half2float(h.y)}; }
/* c + the dot of a's and b's four signed bytes */
static inline int __dp4a(int a, int b, int c) {
    for (int k = 0; k < 4; k++) c += (int)(int8_t)(a >> (8 * k)) * (int)(int8_t)(b >> (8 * k));
    return c;
}
/* the low 32 bits of hi:lo shifted right by min(sh, 32) */
static inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned sh) {
    const uint64_t v = (uint64_t)hi << 32 | lo;
    return (unsigned)(v >> (sh < 32 ? sh : 32));
}
/* byte k of the result: byte (s >> 4k) & 7 of y:x (CUDA's __byte_perm; the selector's bit 3 unused) */
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    const uint64_t v = (uint64_t)y << 32 | x;
    unsigned r = 0;
    for (int k = 0; k < 4; k++) r |= (unsigned)((v >> (8 * ((s >> (4 * k)) & 7))) & 0xFF) << (8 * k);
    return r;
}

// ---- fibers ----

enum { EMU_READY, EMU_BLOCK, EMU_WARP, EMU_DONE };
#if defined(__x86_64__)
/* x86-64: a switch saves the callee-saved registers on the old stack and pops them off the new one
 * (no signal mask syscall, which swapcontext makes twice a switch and which cost half the time) */
struct emu_ctx {
    void *sp;
};
extern "C" void emu_ctx_swap(void **save_sp, void *to_sp) __attribute__((visibility("hidden")));
__asm__(".text\n.globl emu_ctx_swap\n.hidden emu_ctx_swap\n.type emu_ctx_swap, @function\n.p2align 4\n"
        "emu_ctx_swap:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n.size emu_ctx_swap, .-emu_ctx_swap\n");
static inline void emu_swap(emu_ctx *from, emu_ctx *to) { emu_ctx_swap(&from->sp, to->sp); }
/* a fiber that starts in entry (which never returns) on the stack [lo, lo + size) */
static inline void emu_ctx_make(emu_ctx *c, char *lo, size_t size, void (*entry)()) {
    void **sp = (void **)(((uintptr_t)(lo + size)) & ~(uintptr_t)15);
    *--sp = NULL;            /* entry's return address: it never returns */
    *--sp = (void *)entry;   /* emu_ctx_swap's ret lands in entry with rsp = 8 mod 16, as after a call */
    for (int r = 0; r < 6; r++) *--sp = NULL; /* rbp rbx r12..r15 */
    c->sp = sp;
}
#else
struct emu_ctx {
    ucontext_t uc;
};
static inline void emu_swap(emu_ctx *from, emu_ctx *to) { swapcontext(&from->uc, &to->uc); }
static inline void emu_ctx_make(emu_ctx *c, char *lo, size_t size, void (*entry)()) {
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = lo;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = NULL;
    makecontext(&c->uc, entry, 0);
}
#endif
struct emu_fiber {
    emu_ctx ctx;
    int state;
};
static std::vector<emu_fiber> emu_f;
static std::vector<char> emu_stacks;
static emu_ctx emu_main;
static unsigned emu_cur;
static const std::function<void()> *emu_body;
static uint64_t emu_slot[1024];
static uint64_t emu_rng = 0x9E3779B97F4A7C15ull; /* scheduling order (deterministic) */

static inline void emu_yield(int st) {
    emu_f[emu_cur].state = st;
    emu_swap(&emu_f[emu_cur].ctx, &emu_main);
}
static inline void __syncthreads() { emu_yield(EMU_BLOCK); }
alignas(16) static unsigned char emu_dsmem[227 << 10]; /* a block's dynamic shared memory (sm_90's opt-in) */
static inline void __syncwarp(unsigned = 0xffffffffu) { emu_yield(EMU_WARP); }
/* v of the warp's lane that lane_of(this lane) names (every lane of the warp calls it) */
template <class T, class F> static inline T emu_shfl(T v, F lane_of) {
    static_assert(sizeof(T) <= 8, "shuffle width");
    const unsigned t = threadIdx.x;
    memcpy(&emu_slot[t], &v, sizeof v);
    emu_yield(EMU_WARP);
    T r;
    memcpy(&r, &emu_slot[(t & ~31u) | (lane_of(t & 31u) & 31u)], sizeof r);
    emu_yield(EMU_WARP);
    return r;
}
template <class T> static inline T __shfl_sync(unsigned, T v, int src) {
    return emu_shfl(v, [src](unsigned) { return (unsigned)src; });
}
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int o) {
    return emu_shfl(v, [o](unsigned lane) { return lane ^ (unsigned)o; });
}
/* mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.f32 for the calling warp (PTX's fragment layout:
 * a[0] A rows g, k 2t..2t+1; a[1] rows g+8; a[2], a[3] the same at k+8; b[0] B k 2t..2t+1 of column
 * g, b[1] at k+8; d[0..1] D row g, columns 2t..2t+1, d[2..3] row g+8; g = lane/4, t = lane%4):
 * every lane deposits its fragments, then computes its own d += A B (sums in double, rounded once) */
static uint32_t emu_frag[1024][6];
static inline void emu_mma_m16n8k16(float *d, const uint32_t *a, const uint32_t *b, bool bf16) {
    const unsigned th = threadIdx.x, base = th & ~31u;
    memcpy(emu_frag[th], a, 16);
    emu_frag[th][4] = b[0], emu_frag[th][5] = b[1];
    emu_yield(EMU_WARP);
    auto h = [&](uint32_t w, int hi) -> double {
        const unsigned short v = (unsigned short)(hi ? w >> 16 : w & 0xFFFF);
        if (bf16) return (double)__uint_as_float((unsigned)v << 16);
        return (double)__half2float(__ushort_as_half(v));
    };
    double A[16][16], B[16][8];
    for (unsigned l = 0; l < 32; l++) {
        const unsigned g = l >> 2, t = l & 3;
        const uint32_t *f = emu_frag[base + l];
        for (int e = 0; e < 2; e++) {
            A[g][2 * t + e] = h(f[0], e), A[g + 8][2 * t + e] = h(f[1], e);
            A[g][2 * t + 8 + e] = h(f[2], e), A[g + 8][2 * t + 8 + e] = h(f[3], e);
            B[2 * t + e][g] = h(f[4], e), B[2 * t + 8 + e][g] = h(f[5], e);
        }
    }
    const unsigned g = (th & 31) >> 2, t = th & 3;
    for (int i = 0; i < 4; i++) {
        const unsigned r = g + 8 * (i >> 1), c = 2 * t + (i & 1);
        double sum = d[i];
        for (int k = 0; k < 16; k++) sum += A[r][k] * B[k][c];
        d[i] = (float)sum;
    }
    emu_yield(EMU_WARP);
}
/* ldmatrix.sync.aligned.m8n8.{x4,x2}.shared.b16: lane l (l < 8 * nmat) gives the address of row l % 8 of
 * matrix l / 8; every lane receives, of each matrix i, row l / 4's 32-bit word l % 4 in r[i] */
static inline void emu_ldsm(int *r, const void *s, int nmat) {
    const unsigned th = threadIdx.x, base = th & ~31u;
    memcpy(&emu_slot[th], &s, sizeof s);
    emu_yield(EMU_WARP);
    const unsigned l = th & 31;
    for (int i = 0; i < nmat; i++) {
        const unsigned char *row;
        memcpy(&row, &emu_slot[base + 8 * i + l / 4], sizeof row);
        memcpy(&r[i], row + 4 * (l % 4), 4);
    }
    emu_yield(EMU_WARP);
}
/* ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 (nmat matrices): lane l gives the address of row l % 8
 * of matrix l / 8; every lane receives, of each matrix i, the transposed pair: the halves at column
 * l / 4 of rows 2 (l % 4) (low half) and 2 (l % 4) + 1 (high) in r[i] */
static inline void emu_ldsm_trans(uint32_t *r, const void *s, int nmat) {
    const unsigned th = threadIdx.x, base = th & ~31u;
    memcpy(&emu_slot[th], &s, sizeof s);
    emu_yield(EMU_WARP);
    const unsigned l = th & 31;
    for (int i = 0; i < nmat; i++) {
        const unsigned char *r0, *r1;
        memcpy(&r0, &emu_slot[base + 8 * i + 2 * (l % 4)], sizeof r0);
        memcpy(&r1, &emu_slot[base + 8 * i + 2 * (l % 4) + 1], sizeof r1);
        uint16_t lo, hi;
        memcpy(&lo, r0 + 2 * (l / 4), 2);
        memcpy(&hi, r1 + 2 * (l / 4), 2);
        r[i] = (uint32_t)lo | (uint32_t)hi << 16;
    }
    emu_yield(EMU_WARP);
}
/* mma.sync.aligned.m16n8k{32,16}.row.col.s32.s8.s8.s32 with every accumulator input cin (PTX's layout:
 * a[0] A row g, k 4t..4t+3; a[1] row g+8; k32 also a[2], a[3] the same at k+16; b[0] B k 4t..4t+3 of
 * column g, k32 also b[1] at k+16; c[0..1] row g, columns 2t..2t+1, c[2..3] row g+8) */
static inline void emu_mma_s8(int *c, const int *a, const int *b, int cin, int k32) {
    const unsigned th = threadIdx.x, base = th & ~31u;
    memcpy(emu_frag[th], a, (k32 ? 4 : 2) * 4);
    emu_frag[th][4] = (uint32_t)b[0], emu_frag[th][5] = k32 ? (uint32_t)b[1] : 0;
    emu_yield(EMU_WARP);
    int A[16][32], B[32][8];
    const int K = k32 ? 32 : 16;
    for (unsigned l = 0; l < 32; l++) {
        const unsigned g = l >> 2, t = l & 3;
        const uint32_t *f = emu_frag[base + l];
        for (int e = 0; e < 4; e++) {
            A[g][4 * t + e] = (int8_t)(f[0] >> (8 * e)), A[g + 8][4 * t + e] = (int8_t)(f[1] >> (8 * e));
            B[4 * t + e][g] = (int8_t)(f[4] >> (8 * e));
            if (k32) {
                A[g][4 * t + 16 + e] = (int8_t)(f[2] >> (8 * e)), A[g + 8][4 * t + 16 + e] = (int8_t)(f[3] >> (8 * e));
                B[4 * t + 16 + e][g] = (int8_t)(f[5] >> (8 * e));
            }
        }
    }
    const unsigned g = (th & 31) >> 2, t = th & 3;
    for (int i = 0; i < 4; i++) {
        const unsigned rr = g + 8 * (i >> 1), cc = 2 * t + (i & 1);
        int sum = cin;
        for (int k = 0; k < K; k++) sum += A[rr][k] * B[k][cc];
        c[i] = sum;
    }
    emu_yield(EMU_WARP);
}
static void emu_tramp() {
    (*emu_body)();
    emu_f[emu_cur].state = EMU_DONE;
    emu_swap(&emu_f[emu_cur].ctx, &emu_main);
}

/* run body as a grid of `grid` blocks (x fastest) of `block` threads; 0, or -1 on a deadlock (a barrier some
 * live threads never reach) */
static int emu_run3(dim3 grid, unsigned block, const std::function<void()> &body) {
    const size_t stack = 128 * 1024;
    if (block == 0 || block > 1024) return -1;
    emu_f.assign(block, emu_fiber());
    emu_stacks.assign(stack * block, 0);
    emu_body = &body;
    gridDim = grid;
    blockDim = dim3{block, 1, 1};
    for (unsigned b = 0; b < grid.x * grid.y * grid.z; b++) {
        blockIdx = dim3{b % grid.x, b / grid.x % grid.y, b / (grid.x * grid.y)};
        memset(emu_dsmem, 0xFF, sizeof emu_dsmem);
        for (unsigned t = 0; t < block; t++) {
            emu_ctx_make(&emu_f[t].ctx, &emu_stacks[stack * t], stack, emu_tramp);
            emu_f[t].state = EMU_READY;
        }
        unsigned delayed = 0; /* this warp runs only when no other thread can: it drifts behind */
        for (;;) {
            /* the other warps run as far as they can (up to their next block barrier) before the
             * delayed warp moves: a shared-memory race between warps then changes results */
            bool ran = false;
            for (int late = 0; late < 2 && !ran; late++)
                for (unsigned t = 0; t < block; t++) {
                    if (emu_f[t].state != EMU_READY || (t / 32 == delayed) != (late == 1)) continue;
                    emu_cur = t;
                    threadIdx = dim3{t, 0, 0};
                    emu_swap(&emu_main, &emu_f[t].ctx);
                    ran = true;
                }
            unsigned alive = 0, at_block = 0;
            for (unsigned t = 0; t < block; t++) alive += emu_f[t].state != EMU_DONE, at_block += emu_f[t].state == EMU_BLOCK;
            if (!alive) break;
            bool released = false;
            if (at_block == alive) {
                for (unsigned t = 0; t < block; t++)
                    if (emu_f[t].state == EMU_BLOCK) emu_f[t].state = EMU_READY;
                released = true;
                emu_rng = emu_rng * 6364136223846793005ull + 1442695040888963407ull;
                delayed = (unsigned)((emu_rng >> 33) % ((block + 31) / 32));
            }
            for (unsigned w = 0; w < block; w += 32) {
                unsigned wa = 0, ww = 0;
                for (unsigned t = w; t < w + 32 && t < block; t++) wa += emu_f[t].state != EMU_DONE, ww += emu_f[t].state == EMU_WARP;
                if (wa && ww == wa) {
                    for (unsigned t = w; t < w + 32 && t < block; t++)
                        if (emu_f[t].state == EMU_WARP) emu_f[t].state = EMU_READY;
                    released = true;
                }
            }
            if (!ran && !released) return -1;
        }
    }
    return 0;
}
/* a 1-D grid */
static int emu_run(unsigned grid, unsigned block, const std::function<void()> &body) { return emu_run3(dim3{grid, 1, 1}, block, body); }

#endif
