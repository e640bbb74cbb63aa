/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_quantize.cu — f32 activations -> 8-bit activation blocks for the dp4a GEMVs,
 * alone or fused behind RMSNorm (x weight) or SiLU/GELU(gate) x up. Two formats:
 *  - q8_1 (formats.md §3.2, CUDA semantics, as llama.cpp's quantize_q8_1), per 32 values: amax
 *    and sum = warp max / warp sum of the unquantized x; d = amax/127; q = amax == 0 ? 0 :
 *    roundf(x/d) (division, ties away from zero); ds = (F16(d), F16(sum)).
 *  - q8_K (formats.md §2.7, the CPU reference quantize_row_q8_K_ref, which llama.cpp's CPU uses for
 *    K-quant weights), per 256 values: max = the signed value of largest |x| (first on ties);
 *    iscale = -127/max; q = min(127, nint(iscale*x)) (round half even); d = 1/iscale (fp32);
 *    bsums[g] = sum of q over 16 values; all zero when max == 0. Used so K-quant models on CUDA
 *    round activations exactly as the references were computed (docs/cuda.md).
 * RMSNorm: sum of squares in double over the row (as ops_ref.c), scale = 1/sqrtf(mean + eps),
 * v = (x*scale)*w. GLU: v = act(g)*u with k_rows.cu's activations.
 * The RMSNorm's row may also be a small-T GEMM's unreduced split-K partials plus its epilogue
 * (k_rms_norm_quant_split, 1024 threads: the planner's fuse_norm_sums, no reduce kernel between
 * them; only where the rows fit one wave of those — past it, the reduce kernel + the 256-thread rows
 * kernel measured faster: H200 pp512 -0.7% with the sums).
 * The device math (quant_row, q8_K_store, the value sources, block_rms_scale) is
 * device/act_quant.cuh, shared with the generated kernels.
 * Geometry: one 1024-thread block a row; RMSNorm rows past one wave of those (more than 2 an SM)
 * that fit (q8_1, E <= 1024): one 256-thread block a row holding 4 values a thread with the
 * 1024-thread kernel's summation order (k_rms_norm_q8_1_rows, bit-identical). With
 * cu_config.act_fast (SB_TUNE=act_fast=1, slower on the H200) rows of up to 8192 values (aq_fits) take one
 * 256-thread block with every value in a register (act_build: all loads in flight at once).
 * q8_1: a warp's lane = element of its 32-block.
 * q8_K: warp w takes 256-blocks w, w+32, ...; lane l holds elements 32k + l (k < 8), so a warp load
 * is one coalesced 128-byte row segment; max/sum by shuffles; half-warp sums give bsums.
 * Traffic: reads 4*E (x; +4E for w or u) per row, writes 36/32*E (q8_1) or 292/256*E (q8_K);
 * bandwidth-bound, one pass.
 * Tested against: the CPU reference of the unfused chain (tests/runtime/test_cuda_ops.c: norm/glu
 * -> quantize -> matmul) and the whole-model tests (K-quant models vs llama.cpp at ~1e-10 needs
 * q8_K to be bit-exact with quantize_row_q8_K_ref).
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/act_quant.cuh"
#include "backend/cuda/device/split.cuh"

#define Q_THREADS 1024 /* one 32- or 256-value block per warp for rows up to 1024 / 8192 values: no serial rounds */

/* with b != NULL (executor fusion of the residual add before the norm): the row is x + b, written
 * to sum (which may be x or b: each element is read, then written, by one thread) and read back
 * from there after the barrier for the quantization pass */
template <int XQ>
__global__ void __launch_bounds__(Q_THREADS) k_rms_norm_quant(uint8_t *dst, const float *x, const float *wt, int64_t E, float eps,
                                                              const float *b, float *sum_out) {
    CU_PDL_ENTRY();
    __shared__ double part[Q_THREADS / 32];
    const int64_t r = blockIdx.x;
    const float *xr = x + r * E;
    const float sc = block_rms_scale<Q_THREADS>(xr, b ? b + r * E : NULL, b ? sum_out + r * E : NULL, E, eps, part);
    if (b) xr = sum_out + r * E;
    quant_row<XQ, Q_THREADS>(dst + act_row_bytes(XQ, E) * (uint64_t)r, E, src_norm{xr, wt, sc});
}

/* k_rms_norm_quant over a GEMM's split-K partials (cu_rms_norm_quant_split): each thread sums its
 * elements' partials (mma_split_sum: k_mma_reduce's order and epilogue) into sum_out, then the
 * unfused kernel's path reads them back — its own elements in block_rms_scale, every element after
 * that function's barrier in quant_row: the bits of k_mma_reduce + k_rms_norm_quant */
template <int XQ>
__global__ void __launch_bounds__(Q_THREADS) k_rms_norm_quant_split(uint8_t *dst, cu_split_src src, const float *wt, int64_t E, float eps,
                                                                    float *sum_out) {
    CU_PDL_ENTRY();
    __shared__ double part[Q_THREADS / 32];
    const int64_t r = blockIdx.x;
    float *sr = sum_out + r * E;
    for (int64_t i = threadIdx.x; i < E; i += Q_THREADS) sr[i] = mma_split_sum(src.part, r * E + i, i, src.nsplit, src.TN, src.ep);
    const float sc = block_rms_scale<Q_THREADS>(sr, NULL, NULL, E, eps, part);
    quant_row<XQ, Q_THREADS>(dst + act_row_bytes(XQ, E) * (uint64_t)r, E, src_norm{sr, wt, sc});
}

/* GLU or plain quantization, a 1024-thread block a row (quant_row's loop). One warp a quantization
 * block over all rows in 256-thread blocks (no idle warps, one wave at T = 512) measured no faster on
 * the H200: pp512 / pp64 equal, tg64 ~3% slower (bench/NOTES.md, session 7). */
template <int XQ, int KIND>
__global__ void __launch_bounds__(Q_THREADS) k_quant_rows(uint8_t *dst, const float *x, const float *g, const float *u, int64_t E, int gelu) {
    CU_PDL_ENTRY();
    const int64_t r = blockIdx.x;
    uint8_t *d = dst + act_row_bytes(XQ, E) * (uint64_t)r;
    if (KIND == AQ_GLU) quant_row<XQ, Q_THREADS>(d, E, src_glu{g + r * E, u + r * E, gelu});
    else quant_row<XQ, Q_THREADS>(d, E, src_plain{x + r * E});
}

/* RMSNorm rows past one wave of the 1024-thread kernel (q8_1, E <= 1024, E % 32 == 0): 256 threads
 * (one wave of 512 rows instead of two on the H200: 7.5-8.4 -> 5.9 µs), each holding the values
 * t + 256k (k < 4). The sum of squares is block_rms_scale<1024>'s, bit for bit: value t + 256k
 * is that of the 1024-thread kernel's thread t + 256k, whose warp (w + 8k) sums it by the same
 * butterfly, and the 32 warp partials meet in the same order; quantization block w + 8k is then
 * exactly this warp's k-th set of values, so nothing is re-read. */
#define NR_THREADS 256
__global__ void __launch_bounds__(NR_THREADS) k_rms_norm_q8_1_rows(uint8_t *dst, const float *x, const float *wt, int64_t E, float eps,
                                                                   const float *b, float *sum_out) {
    CU_PDL_ENTRY();
    constexpr int VPT = Q_THREADS / NR_THREADS;
    __shared__ double part[Q_THREADS / 32];
    const int64_t r = blockIdx.x, o = r * E;
    const int t = threadIdx.x, lane = t & 31, w = t >> 5;
    float v[VPT];
#pragma unroll
    for (int k = 0; k < VPT; k++) {
        const int i = t + NR_THREADS * k;
        v[k] = i < E ? (b ? x[o + i] + b[o + i] : x[o + i]) : 0.0f;
    }
    if (b)
#pragma unroll
        for (int k = 0; k < VPT; k++)
            if (t + NR_THREADS * k < E) sum_out[o + t + NR_THREADS * k] = v[k];
#pragma unroll
    for (int k = 0; k < VPT; k++) {
        double a = 0.0;
        if (t + NR_THREADS * k < E) a += (double)(v[k] * v[k]);
        a = warp_sum_d(a);
        if (lane == 0) part[w + (NR_THREADS / 32) * k] = a;
    }
    __syncthreads();
    double sum = 0.0;
#pragma unroll
    for (int k = 0; k < Q_THREADS / 32; k++) sum += part[k];
    const float sc = 1.0f / sqrtf((float)(sum / (double)E) + eps);
    blk_q8_1 *d = (blk_q8_1 *)(dst + act_row_bytes(CU_T_Q8_1, E) * (uint64_t)r);
#pragma unroll
    for (int k = 0; k < VPT; k++) {
        const int blk = w + (NR_THREADS / 32) * k, i = t + NR_THREADS * k;
        if (blk >= E / 32) break; /* warp-uniform */
        const float y = v[k] * sc;
        q8_1_store(d + blk, wt ? y * wt[i] : y, lane);
    }
}

/* where the 1024-thread kernel needs more than one wave (two blocks an SM): at T = 1 its body
 * measured 4.0 µs vs 4.8 (H200), at T = 64 3.7 vs 4.8, at T = 512 7.5-8.4 vs 5.9 */
static int64_t norm_rows_min;
static bool norm_rows_fit(int xq, int64_t E, int64_t rows) {
    if (!norm_rows_min) norm_rows_min = 2 * (int64_t)(cu_sm_count() > 0 ? cu_sm_count() : 132) + 1;
    return cu_cfg()->norm_rows && rows >= norm_rows_min && xq == CU_T_Q8_1 && E <= Q_THREADS && E % 32 == 0;
}
extern "C" bool cu_norm_rows_fit(int xq, int64_t E, int64_t rows) { return norm_rows_fit(xq, E, rows); }

/* rows that fit in registers (aq_fits with 256 threads): act_build */
#define AQ_THREADS 256
extern "C" bool cu_act_fast(void) { return cu_cfg()->act_fast != 0; }

template <int XQ, int KIND, int VM>
__global__ void __launch_bounds__(AQ_THREADS) k_act_rows(uint8_t *dst, int64_t E, const float *x, const float *w, float eps, const float *b,
                                                         float *sum_out, const float *g, const float *u, int gelu) {
    CU_PDL_ENTRY();
    __shared__ double part[AQ_THREADS / 32];
    const int64_t r = blockIdx.x, o = r * E;
    act_build<XQ, AQ_THREADS, KIND, VM>(dst + act_row_bytes(XQ, E) * (uint64_t)r, E, x ? x + o : NULL, w, eps, b ? b + o : NULL,
                                    sum_out ? sum_out + o : NULL, g ? g + o : NULL, u ? u + o : NULL, gelu, part);
}

template <int KIND>
static sb_status act_rows(cudaStream_t st, int xq, void *dst, int64_t E, int64_t rows, const float *x, const float *w, float eps, const float *b,
                          float *sum_out, const float *g, const float *u, int gelu) {
    const bool small = aq_fits(xq, E, AQ_THREADS, 8);
    if (xq == CU_T_Q8_1 && small)
        cu_launch(k_act_rows<CU_T_Q8_1, KIND, 8>, (unsigned)rows, AQ_THREADS, st, (uint8_t *)dst, E, x, w, eps, b, sum_out, g, u, gelu);
    else if (xq == CU_T_Q8_1)
        cu_launch(k_act_rows<CU_T_Q8_1, KIND, AQ_MAXV>, (unsigned)rows, AQ_THREADS, st, (uint8_t *)dst, E, x, w, eps, b, sum_out, g, u, gelu);
    else if (small)
        cu_launch(k_act_rows<CU_T_Q8_K, KIND, 8>, (unsigned)rows, AQ_THREADS, st, (uint8_t *)dst, E, x, w, eps, b, sum_out, g, u, gelu);
    else
        cu_launch(k_act_rows<CU_T_Q8_K, KIND, AQ_MAXV>, (unsigned)rows, AQ_THREADS, st, (uint8_t *)dst, E, x, w, eps, b, sum_out, g, u, gelu);
    return cu_after_launch("k_act_rows");
}

static sb_status bad_type(int xq) { return sb_fail(SB_ERR_UNSUPPORTED, "cuda: activation type %d (Q8_1 or Q8_K only)", xq); }

/* the 1024-thread plain / GLU quantizer (k_quant_rows) for xq, or the register kernels (cu_config.act_fast)
 * where a row fits them */
template <int KIND>
static sb_status quant_rows_launch(cudaStream_t st, int xq, void *dst, const float *x, const float *g, const float *u, int64_t E, int64_t rows,
                                   int gelu) {
    if (cu_cfg()->act_fast && (xq == CU_T_Q8_1 || xq == CU_T_Q8_K) && aq_fits(xq, E, AQ_THREADS))
        return act_rows<KIND>(st, xq, dst, E, rows, x, NULL, 0.0f, NULL, NULL, g, u, gelu);
    if (xq == CU_T_Q8_1) cu_launch(k_quant_rows<CU_T_Q8_1, KIND>, (unsigned)rows, Q_THREADS, st, (uint8_t *)dst, x, g, u, E, gelu);
    else if (xq == CU_T_Q8_K) cu_launch(k_quant_rows<CU_T_Q8_K, KIND>, (unsigned)rows, Q_THREADS, st, (uint8_t *)dst, x, g, u, E, gelu);
    else return bad_type(xq);
    return cu_after_launch(KIND == AQ_GLU ? "k_quant_rows (GLU)" : "k_quant_rows");
}

extern "C" sb_status cu_quantize_act(cu_stream s, int xq, void *dst, const float *x, int64_t E, int64_t rows) {
    return rows <= 0 ? SB_OK : quant_rows_launch<AQ_PLAIN>((cudaStream_t)s, xq, dst, x, NULL, NULL, E, rows, 0);
}

extern "C" sb_status cu_rms_norm_quant(cu_stream s, int xq, void *dst, const float *x, const float *w, int64_t E, int64_t rows, float eps) {
    return cu_add_rms_norm_quant(s, xq, dst, NULL, x, NULL, w, E, rows, eps);
}

extern "C" sb_status cu_add_rms_norm_quant(cu_stream s, int xq, void *dst, float *sum_out, const float *x, const float *b, const float *w,
                                           int64_t E, int64_t rows, float eps) {
    if (rows <= 0) return SB_OK;
    const cudaStream_t st = (cudaStream_t)s;
    if (cu_cfg()->act_fast && (xq == CU_T_Q8_1 || xq == CU_T_Q8_K) && aq_fits(xq, E, AQ_THREADS))
        return act_rows<AQ_NORM>(st, xq, dst, E, rows, x, w, eps, b, sum_out, NULL, NULL, 0);
    if (norm_rows_fit(xq, E, rows)) cu_launch(k_rms_norm_q8_1_rows, (unsigned)rows, NR_THREADS, st, (uint8_t *)dst, x, w, E, eps, b, sum_out);
    else if (xq == CU_T_Q8_1) cu_launch(k_rms_norm_quant<CU_T_Q8_1>, (unsigned)rows, Q_THREADS, st, (uint8_t *)dst, x, w, E, eps, b, sum_out);
    else if (xq == CU_T_Q8_K) cu_launch(k_rms_norm_quant<CU_T_Q8_K>, (unsigned)rows, Q_THREADS, st, (uint8_t *)dst, x, w, E, eps, b, sum_out);
    else return bad_type(xq);
    return cu_after_launch(b ? "k_rms_norm_quant (+ residual)" : "k_rms_norm_quant");
}

extern "C" sb_status cu_rms_norm_quant_split(cu_stream s, int xq, void *dst, float *sum_out, const cu_split_src *src, const float *w, int64_t E,
                                             int64_t rows, float eps) {
    if (rows <= 0) return SB_OK;
    if (!src || !src->part || src->nsplit < 1 || src->nsplit > MMA_SPLIT_MAX || src->N != E || src->TN != E * rows || !sum_out)
        return sb_fail(SB_ERR_INTERNAL, "cuda: RMSNorm over split partials that are not %lld x %lld (N %lld, TN %lld, %d splits)", (long long)E,
                       (long long)rows, src ? (long long)src->N : -1LL, src ? (long long)src->TN : -1LL, src ? src->nsplit : 0);
    const cudaStream_t st = (cudaStream_t)s;
    if (xq == CU_T_Q8_1) cu_launch(k_rms_norm_quant_split<CU_T_Q8_1>, (unsigned)rows, Q_THREADS, st, (uint8_t *)dst, *src, w, E, eps, sum_out);
    else if (xq == CU_T_Q8_K) cu_launch(k_rms_norm_quant_split<CU_T_Q8_K>, (unsigned)rows, Q_THREADS, st, (uint8_t *)dst, *src, w, E, eps, sum_out);
    else return bad_type(xq);
    return cu_after_launch("k_rms_norm_quant_split");
}

extern "C" sb_status cu_glu_quant(cu_stream s, int xq, void *dst, const float *g, const float *u, int64_t E, int64_t rows, bool gelu) {
    return rows <= 0 ? SB_OK : quant_rows_launch<AQ_GLU>((cudaStream_t)s, xq, dst, NULL, g, u, E, rows, gelu ? 1 : 0);
}
