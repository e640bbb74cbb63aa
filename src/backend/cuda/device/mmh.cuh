/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/mmh.cuh — the half-weight (F16 / BF16) matrix products' device code, for
 * k_mmf.cu's launchers: dst [N,T] = W x with W [K,N] of 16-bit floats and x [K,T] f32.
 * Math: the reference's (llama.cpp's CPU): every activation rounded to the weight's type first
 * (round to nearest even), products of two 16-bit floats (exact in f32), f32 sums; only the order
 * of the sums differs from op_matmul.
 * - mmh_gemv_block (T <= 8, decode): a row over 32, 64 or 128 lanes (by K), each lane 8 weights
 *   (one 16-byte load) a chunk and MMH_U chunks in flight, every token of the tile from the same
 *   load; traffic: the weights once (2 bytes a value), x from L1.
 * - mmh_tile (T > 8, prefill): 128 threads own 64 rows x 64 tokens; per K step of 32 the block
 *   stages W (64 x 32 halves) and x rounded to halves (64 x 32) in shared memory (row stride 40
 *   halves: the 8 rows a fragment load touches fall in distinct banks), each warp 32 rows x 32
 *   tokens of mma.sync.m16n8k16 (f32 accumulators); the next step's global loads are in registers
 *   while the current step's MMAs run, and the first weights load before the PDL wait. Traffic:
 *   weights once per 64 tokens, x once per 64 rows (as f32).
 * Layer 0 (backend/cuda), device code. Also built for the host by tests/runtime/test_cuda_mmh_emu
 * (tests/codegen/emu: the MMA's fragments exchanged between the warp's fibers), so both functions
 * take their block coordinates as arguments.
 * Non-goals: F32 weights (k_mmf: a TF32 tensor-core product would round the weights).
 */
#ifndef SB_BACKEND_CUDA_DEVICE_MMH_CUH
#define SB_BACKEND_CUDA_DEVICE_MMH_CUH

#include "backend/cuda/device/gemv_dot.cuh"

/* f32 -> bf16 bits, round to nearest even (finite values and infinities; a NaN stays a NaN) —
 * __float2bfloat16_rn's result, without cuda_bf16.h */
static __device__ __forceinline__ uint16_t cu_f2bf(float f) {
    const uint32_t u = __float_as_uint(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
/* a value of the weight type HT (CU_T_F16 / CU_T_BF16): to its bits, from its bits */
template <int HT> static __device__ __forceinline__ uint32_t mmh_bits(float f) { return HT == CU_T_F16 ? cu_f2h(f) : cu_f2bf(f); }
template <int HT> static __device__ __forceinline__ float mmh_val(uint32_t b) {
    return HT == CU_T_F16 ? cu_h2f((uint16_t)b) : cu_bf2f((uint16_t)b);
}
/* two f32 activations rounded to HT, packed low | high (an MMA operand register) */
template <int HT> static __device__ __forceinline__ uint32_t mmh_pack(float lo, float hi) { return mmh_bits<HT>(lo) | mmh_bits<HT>(hi) << 16; }

#ifdef SB_CUDA_EMU_H
/* host emulation (tests/codegen/emu/cuda_emu.h) */
#define MMH_MMA(HT, d, a, b) emu_mma_m16n8k16((d), (a), (b), (HT) == CU_T_BF16)
#else
/* d += A (16 x 16, row-major fragments a[4]) x B (16 x 8, column fragments b[2]), f32 accumulators:
 * PTX's m16n8k16 layout — a[0] rows g, k 2t..2t+1; a[1] rows g + 8; a[2], a[3] the same at k + 8;
 * b[0] k 2t..2t+1 of column g, b[1] at k + 8; d[0..1] row g, columns 2t..2t+1, d[2..3] row g + 8
 * (g = lane / 4, t = lane % 4) */
template <int HT> static __device__ __forceinline__ void mmh_mma(float *d, const uint32_t *a, const uint32_t *b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (HT == CU_T_F16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}
#define MMH_MMA(HT, d, a, b) mmh_mma<HT>((d), (a), (b))
#endif

/* ---- T <= 8: a row over TPR lanes ---- */

/* k_mmh1's geometry: a block of 128 threads is 128 / TPR groups of TPR lanes, a group a row. A
 * row's 16-byte chunks go to its group's lanes in turn, MMH_U chunks a lane in flight a step, and
 * TPR grows with K until each lane has about MMH_U chunks: a short grid (K / V's 1,024 rows) still
 * keeps every SM's loads in flight, and a long row's lanes never wait on one load at a time. */
#define MMH_U 4
static __host__ __device__ inline int mmh_gemv_tpr(int64_t K) { return K >= 4096 ? 128 : K >= 2048 ? 64 : 32; }

/* a 16-byte weight load that bypasses L1 (each weight is read once) */
static __device__ __forceinline__ uint4 mmh_ld_w(const uint4 *p) {
#ifdef __CUDA_ARCH__
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
#else
    return *p;
#endif
}

/* the 8 values of x at token row xr, chunk k8, rounded to HT (the reference's rounding) */
template <int HT> static __device__ __forceinline__ void mmh_x8(const float *xr, int64_t k8, float *xv) {
    const float4 *xp = (const float4 *)(xr + 8 * k8);
    const float4 x0 = xp[0], x1 = xp[1];
    const float f[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
    for (int i = 0; i < 8; i++) xv[i] = mmh_val<HT>(mmh_bits<HT>(f[i]));
}

/* the group's lane partials of one row's dots with NC tokens (nt live): lane l takes chunks
 * l + TPR j, the loads of MMH_U steps issued before any arithmetic. K % 8 == 0. */
template <int HT, int NC, int TPR>
static __device__ __forceinline__ void mmh_gemv_row(const uint4 *row, const float *x, int64_t K, int nt, int lane, float (&acc)[NC]) {
#pragma unroll
    for (int c = 0; c < NC; c++) acc[c] = 0.0f;
    const int64_t K8 = K / 8;
    for (int64_t b = lane; b < K8; b += TPR * MMH_U) {
        uint4 wv[MMH_U];
#pragma unroll
        for (int u = 0; u < MMH_U; u++) wv[u] = b + u * TPR < K8 ? mmh_ld_w(row + b + u * TPR) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < MMH_U; u++) {
            const int64_t k8 = b + u * TPR;
            if (k8 >= K8) break;
            const uint32_t ww[4] = {wv[u].x, wv[u].y, wv[u].z, wv[u].w};
            float w[8];
#pragma unroll
            for (int i = 0; i < 4; i++) w[2 * i] = mmh_val<HT>(ww[i] & 0xFFFFu), w[2 * i + 1] = mmh_val<HT>(ww[i] >> 16);
#pragma unroll
            for (int c = 0; c < NC; c++) {
                if (c >= nt) break;
                float xv[8];
                mmh_x8<HT>(x + c * K, k8, xv);
#pragma unroll
                for (int i = 0; i < 8; i++) acc[c] += w[i] * xv[i];
            }
        }
    }
}

/* the block bx of k_mmh1's grid (ceil(N / (128 / TPR)) blocks of 128 threads): NC >= T tokens,
 * dst [T,N] = W x + (add: [N] bias when bcast, else [T,N]). The block's rows are consecutive and
 * consecutive threads sum and store a token's results, so they leave as one store of consecutive
 * floats: an LM head may write its logits straight into page-locked host memory, where each
 * store is a transfer over PCIe (k_mmvq1 does the same). */
template <int HT, int NC, int TPR>
static __device__ __forceinline__ void mmh_gemv_block(float *dst, const uint8_t *w, int64_t K, int64_t N, const float *x, int64_t T,
                                                      const float *add, int bcast, unsigned bx) {
    constexpr int RPB = 128 / TPR, WPG = TPR / 32; /* rows a block, warps a row */
    const int64_t r0 = (int64_t)bx * RPB, r1 = r0 + RPB < N ? r0 + RPB : N;
    prefetch_rows(w + (uint64_t)r0 * (uint64_t)(2 * K), (uint64_t)(r1 - r0) * (uint64_t)(2 * K), threadIdx.x, 128);
    CU_PDL_ENTRY();
    __shared__ float part[4][NC];
    const int tid = threadIdx.x, grp = tid / TPR, wp = tid >> 5;
    const int nt = (int)(T < NC ? T : NC);
    const int64_t n = r0 + grp < N ? r0 + grp : N - 1; /* a row past N reads row N - 1 and is not stored */
    float acc[NC];
    mmh_gemv_row<HT, NC, TPR>((const uint4 *)(w + (uint64_t)n * (uint64_t)(2 * K)), x, K, nt, tid % TPR, acc);
#pragma unroll
    for (int c = 0; c < NC; c++) {
        const float v = warp_sum(acc[c]);
        if ((tid & 31) == 0) part[wp][c] = v;
    }
    __syncthreads();
    if (tid < RPB * NC) {
        const int c = tid / RPB, i = tid % RPB;
        float v = 0.0f;
#pragma unroll
        for (int q = 0; q < WPG; q++) v += part[i * WPG + q][c];
        if (c < nt && r0 + i < r1) dst[c * N + r0 + i] = add ? v + add[bcast ? r0 + i : c * N + r0 + i] : v;
    }
}

/* Calls launch(mmh_gemv_shape<HT, NC, TPR>{}) for the kernel k_mmh1 runs at T (<= 8) tokens and
 * tpr lanes a row: the one dispatch the launcher and the host emulation share. */
template <int HT_, int NC_, int TPR_> struct mmh_gemv_shape {
    static constexpr int HT = HT_, NC = NC_, TPR = TPR_;
};
template <int HT, int NC, class L> static void mmh_gemv_pick_tpr(int tpr, const L &launch) {
    if (tpr == 128) launch(mmh_gemv_shape<HT, NC, 128>{});
    else if (tpr == 64) launch(mmh_gemv_shape<HT, NC, 64>{});
    else launch(mmh_gemv_shape<HT, NC, 32>{});
}
template <int HT, class L> static void mmh_gemv_pick(int64_t T, int tpr, const L &launch) {
    if (T == 1) mmh_gemv_pick_tpr<HT, 1>(tpr, launch);
    else if (T == 2) mmh_gemv_pick_tpr<HT, 2>(tpr, launch);
    else if (T <= 4) mmh_gemv_pick_tpr<HT, 4>(tpr, launch);
    else mmh_gemv_pick_tpr<HT, 8>(tpr, launch);
}

/* ---- T > 8: 64 x 64 tiles on tensor cores ---- */

#define MMH_BN 64
#define MMH_BT 64
#define MMH_KS 32
#define MMH_LD 40 /* halves a staged row: 80 bytes, 20 words (g * 20 + t distinct mod 32) */

/* A warp's M x 4 accumulator tiles (m16n8 C fragments, g = lane >> 2, t = lane & 3) into dst [T, N]:
 * tile (m, n) holds rows row0 + 16m .. +15 and tokens tok0 + 8n .. +7; rows past N and tokens past
 * T are not written; add (bias [N] where bcast, else [T, N]) is added as each value is stored. */
template <int M>
static __device__ __forceinline__ void mmh_store_acc(float *dst, const float (&acc)[M][4][4], int64_t N, int64_t T, int64_t row0, int64_t tok0,
                                                     int g, int t, const float *add, bool bcast) {
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
        for (int n = 0; n < 4; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int64_t row = row0 + 16 * m + g + 8 * (i >> 1), tok = tok0 + 8 * n + 2 * t + (i & 1);
                if (row < N && tok < T) {
                    const int64_t o = tok * N + row;
                    dst[o] = add ? acc[m][n][i] + add[bcast ? row : o] : acc[m][n][i];
                }
            }
}

/* the block (bx, by) of the grid (ceil(N / 64), ceil(T / 64)), 128 threads; w rows are 2K bytes
 * (16-byte aligned: K % 32 == 0), x token rows K floats; dst [T,N] = W x + (add: [N] bias when
 * bcast, else [T,N]) */
template <int HT>
static __device__ __forceinline__ void mmh_tile(float *dst, const uint8_t *w, int64_t K, int64_t N, const float *x, int64_t T, const float *add,
                                                int bcast, unsigned bx, unsigned by) {
    __shared__ __align__(16) uint16_t ws[MMH_BN][MMH_LD];
    __shared__ __align__(16) uint16_t xs[MMH_BT][MMH_LD];
    const int tid = threadIdx.x, lane = tid & 31, wp = tid >> 5, g = lane >> 2, t = lane & 3;
    const int wr = wp & 1, wt = wp >> 1; /* warp: rows 32 wr .., tokens 32 wt .. */
    const int64_t n0 = (int64_t)bx * MMH_BN, t0 = (int64_t)by * MMH_BT;
    float acc[2][4][4] = {};
    uint4 wreg[2];  /* this thread's next weights: rows u / 4, 8 halves at 8 (u % 4), u = tid + 128 i */
    float4 xreg[4]; /* and activations: tokens u / 8, 4 floats at 4 (u % 8) */
    auto fetch_w = [&](int64_t k0) {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int u = tid + 128 * i, r = u >> 2, q = u & 3;
            wreg[i] = n0 + r < N ? *(const uint4 *)(w + (uint64_t)(n0 + r) * (uint64_t)(2 * K) + 2 * (k0 + 8 * q)) : make_uint4(0, 0, 0, 0);
        }
    };
    auto fetch_x = [&](int64_t k0) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int u = tid + 128 * i, tk = u >> 3, q = u & 7;
            xreg[i] = t0 + tk < T ? *(const float4 *)(x + (t0 + tk) * K + k0 + 4 * q) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    };
    auto store = [&]() {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int u = tid + 128 * i, r = u >> 2, q = u & 3;
            *(uint4 *)&ws[r][8 * q] = wreg[i];
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int u = tid + 128 * i, tk = u >> 3, q = u & 7;
            *(uint2 *)&xs[tk][4 * q] = make_uint2(mmh_pack<HT>(xreg[i].x, xreg[i].y), mmh_pack<HT>(xreg[i].z, xreg[i].w));
        }
    };
    fetch_w(0); /* weights: never written by a kernel, so before the wait */
    CU_PDL_ENTRY();
    fetch_x(0);
    store();
    __syncthreads();
    for (int64_t k0 = 0; k0 < K; k0 += MMH_KS) {
        const bool more = k0 + MMH_KS < K;
        if (more) fetch_w(k0 + MMH_KS), fetch_x(k0 + MMH_KS);
#pragma unroll
        for (int ks = 0; ks < MMH_KS; ks += 16) {
            uint32_t a[2][4], b[4][2];
#pragma unroll
            for (int m = 0; m < 2; m++) {
                const int r = 32 * wr + 16 * m + g;
                a[m][0] = *(const uint32_t *)&ws[r][ks + 2 * t];
                a[m][1] = *(const uint32_t *)&ws[r + 8][ks + 2 * t];
                a[m][2] = *(const uint32_t *)&ws[r][ks + 2 * t + 8];
                a[m][3] = *(const uint32_t *)&ws[r + 8][ks + 2 * t + 8];
            }
#pragma unroll
            for (int n = 0; n < 4; n++) {
                const int c = 32 * wt + 8 * n + g;
                b[n][0] = *(const uint32_t *)&xs[c][ks + 2 * t];
                b[n][1] = *(const uint32_t *)&xs[c][ks + 2 * t + 8];
            }
#pragma unroll
            for (int m = 0; m < 2; m++)
#pragma unroll
                for (int n = 0; n < 4; n++) MMH_MMA(HT, acc[m][n], a[m], b[n]);
        }
        __syncthreads();
        if (more) {
            store();
            __syncthreads();
        }
    }
    mmh_store_acc<2>(dst, acc, N, T, n0 + 32 * wr, t0 + 32 * wt, g, t, add, bcast);
}

#endif
