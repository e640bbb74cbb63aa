/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_rows.cu — row gathers, row-wise elementwise chains, softmax and the tensor ABI's
 * row and copy ops.
 * Math: get_rows y[:,t] = dequant(w[:, tok[t]]) (tok NULL: w[:, t], rows gathered on the host);
 * select_rows y[:,i] = x[:, idx[i]]; slice y[:, j, k] = x[:, start + j, k] (ne[1] cut to n);
 * ew chain: the FUSED node's steps (add/mul with a broadcast or full operand, scale, softcap,
 * silu, gelu (ggml's fp16-table GELU emulated: fp16(gelu(fp16(x))), identity above 10, 0 below
 * -10), rms_norm with the sum of squares in double as the CPU reference); glu: act(g) * u.
 * ew chain with a quantize tail (pass fuse_chain_quant): the chain's row, then that row quantized
 * (device/act_quant.cuh's quant_row) as it is or rms-normalised [* w] first, its sum of squares in
 * the order of the kernel the unfused RMS_NORM_QUANT takes — the bits of cu_ew_rows followed by
 * cu_quantize_act / cu_rms_norm_quant. The chains' device code is device/ew_rows.cuh (the host
 * emulation runs it: tests/runtime/test_cuda_ew_quant_emu).
 * Geometry: get/select/slice: grid (E/256, rows), one thread per element (slice: the y blocks walk
 * its n * outer rows, at most 65535 of them a pass). ew chain with an rms_norm: one 256-thread
 * block per row; thread i owns elements i, i+256, ... through every step, so only the rms_norm step
 * needs a block reduction (warp shuffles + 8 partials in shared memory); without one (k_ew_flat): a
 * thread a value over all rows, at most 65,536 blocks striding, so a single long row (a decode
 * step's logits through a softcap) spreads over the GPU instead of one block. With a quantize tail: one
 * 1024-thread block per row (the chain's sums by its first 256 threads, as k_ew_rows's), a barrier,
 * then the quantizer's layout (warp w: quantization blocks w, w + 32, ...).
 * Traffic: get_rows reads T rows of the table (T*E*bytes/elem) and writes 4*T*E; slice reads and
 * writes 4*E*n*outer each; a chain reads x once, each operand once and writes dst once (later steps
 * hit L1): 8*E*T + 4*E*T per operand,
 * intensity < 1 FLOP/B, bandwidth-bound; at decode sizes (E ~ 1e3) launch latency dominates.
 * The tensor ABI's ops (layer_norm, exact gelu, concat, permute): device/tensor_ops.cuh says their
 * math and geometry (layer_norm a block a row; the copies a 2-D grid of 256-thread blocks in
 * strides); each reads its input once and writes its output once — permute's reads are strided
 * (uncoalesced) when perm[0] != 0.
 * Tested against: ops_ref.c op_get_rows/op_select_rows/op_slice/op_add/.../op_rms_norm/op_geglu through
 * tests/runtime/test_cuda_ops.c and the whole-model tests; the chain with a quantize tail against the
 * chain and quantizer kernels apart, byte for byte (test_cuda_ew_quant_emu on the host, test_cuda_ops);
 * the tensor ABI's ops against op_layer_norm / op_gelu / op_concat / op_permute
 * (test_cuda_tensor_ops_emu on the host, test_cuda_ops).
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/ew_rows.cuh"
#include "backend/cuda/device/tensor_ops.cuh"

// ---- get_rows / select_rows ----

__global__ void k_get_rows(float *dst, const uint8_t *w, int wtype, int64_t E, uint64_t rb, const int32_t *tok) {
    CU_PDL_ENTRY();
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (e >= E) return;
    dst[t * E + e] = cu_deq1(wtype, w + (uint64_t)(tok ? tok[t] : t) * rb, e);
}

extern "C" sb_status cu_get_rows(cu_stream s, float *dst, const void *w, int wtype, int64_t E, uint64_t row_bytes,
                                 const int32_t *tok, int64_t T) {
    if (T <= 0) return SB_OK;
    cu_launch(k_get_rows, dim3(cu_div_up(E, 256), (unsigned)T), 256, (cudaStream_t)s, dst, (const uint8_t *)w, wtype, E, row_bytes, tok);
    return cu_after_launch("k_get_rows");
}

__global__ void k_select_rows(float *dst, const float *x, int64_t E, const int32_t *idx) {
    CU_PDL_ENTRY();
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y;
    if (e < E) dst[i * E + e] = x[(int64_t)idx[i] * E + e];
}

extern "C" sb_status cu_select_rows(cu_stream s, float *dst, const float *x, int64_t E, const int32_t *idx, int64_t n) {
    if (n <= 0) return SB_OK;
    cu_launch(k_select_rows, dim3(cu_div_up(E, 256), (unsigned)n), 256, (cudaStream_t)s, dst, x, E, idx);
    return cu_after_launch("k_select_rows");
}

__global__ void k_slice_rows(float *dst, const float *x, int64_t E, int64_t b, int64_t start, int64_t n, int64_t rows) {
    CU_PDL_ENTRY();
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= E) return;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) { /* y row r = (k, j): x row k * b + start + j */
        const int64_t k = r / n, j = r % n;
        dst[r * E + e] = x[(k * b + start + j) * E + e];
    }
}

extern "C" sb_status cu_slice_rows(cu_stream s, float *dst, const float *x, int64_t E, int64_t b, int64_t start, int64_t n, int64_t outer) {
    const int64_t rows = n * outer;
    if (rows <= 0 || E <= 0) return SB_OK;
    cu_launch(k_slice_rows, dim3(cu_div_up(E, 256), (unsigned)(rows < 65535 ? rows : 65535)), 256, (cudaStream_t)s, dst, x, E, b, start, n, rows);
    return cu_after_launch("k_slice_rows");
}

// ---- elementwise chains ----

__global__ void __launch_bounds__(EW_THREADS) k_ew_rows(float *dst, const float *x, int64_t E, cu_ew_chain c) {
    CU_PDL_ENTRY();
    __shared__ double part[EW_THREADS / 32];
    const int64_t r = blockIdx.x;
    ew_chain_row<EW_THREADS>(dst + r * E, x + r * E, r, E, c, part);
}

__global__ void __launch_bounds__(EW_THREADS) k_ew_flat(float *dst, const float *x, int64_t E, int64_t n, cu_ew_chain c) {
    CU_PDL_ENTRY();
    ew_chain_flat(dst, x, E, n, c, (int64_t)blockIdx.x * EW_THREADS + threadIdx.x, (int64_t)gridDim.x * EW_THREADS);
}

extern "C" sb_status cu_ew_rows(cu_stream s, float *dst, const float *x, int64_t E, int64_t rows, const cu_ew_chain *c) {
    if (rows <= 0) return SB_OK;
    bool norm = false;
    for (int k = 0; k < c->n; k++) norm |= c->st[k].op == CU_EW_RMS_NORM;
    if (!norm) { /* no row sum: the values spread over the grid, whatever the row count */
        const int64_t n = E * rows, blocks = cu_div_up(n, EW_THREADS);
        cu_launch(k_ew_flat, (unsigned)(blocks < 65536 ? blocks : 65536), EW_THREADS, (cudaStream_t)s, dst, x, E, n, *c);
        return cu_after_launch("k_ew_flat");
    }
    cu_launch(k_ew_rows, (unsigned)rows, EW_THREADS, (cudaStream_t)s, dst, x, E, *c);
    return cu_after_launch("k_ew_rows");
}

// ---- elementwise chains with a quantize tail ----

template <int XQ, int TAIL>
__global__ void __launch_bounds__(EWQ_THREADS) k_ew_quant_rows(float *dst, const float *x, int64_t E, cu_ew_chain c, uint8_t *q, const float *qw,
                                                              float eps) {
    CU_PDL_ENTRY();
    __shared__ double part[EWQ_THREADS / 32];
    ew_quant_row<XQ, TAIL>(dst, x, blockIdx.x, E, c, q, qw, eps, part);
}

template <int XQ>
static void ew_quant_launch(cudaStream_t st, int tail, float *dst, const float *x, int64_t E, int64_t rows, const cu_ew_chain *c, void *q,
                            const float *qw, float eps) {
    if (tail == EWQ_PLAIN) cu_launch(k_ew_quant_rows<XQ, EWQ_PLAIN>, (unsigned)rows, EWQ_THREADS, st, dst, x, E, *c, (uint8_t *)q, qw, eps);
    else if (tail == EWQ_NORM) cu_launch(k_ew_quant_rows<XQ, EWQ_NORM>, (unsigned)rows, EWQ_THREADS, st, dst, x, E, *c, (uint8_t *)q, qw, eps);
    else cu_launch(k_ew_quant_rows<XQ, EWQ_NORM_ACT>, (unsigned)rows, EWQ_THREADS, st, dst, x, E, *c, (uint8_t *)q, qw, eps);
}

extern "C" sb_status cu_ew_quant_rows(cu_stream s, float *dst, const float *x, int64_t E, int64_t rows, const cu_ew_chain *c, int xq, void *q,
                                      bool norm, const float *qw, float eps) {
    if (rows <= 0) return SB_OK;
    if ((xq != CU_T_Q8_1 && xq != CU_T_Q8_K) || E % (xq == CU_T_Q8_1 ? 32 : 256))
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: chain quantize tail to type %d over rows of %lld (Q8_1 or Q8_K, whole blocks)", xq, (long long)E);
    /* the norm sums as the kernel the unfused RMS_NORM_QUANT would take (cu_add_rms_norm_quant; the
     * generated ones follow it) */
    const int tail = !norm ? EWQ_PLAIN : cu_cfg()->act_fast && aq_fits(xq, E, 256) ? EWQ_NORM_ACT : EWQ_NORM;
    if (xq == CU_T_Q8_1) ew_quant_launch<CU_T_Q8_1>((cudaStream_t)s, tail, dst, x, E, rows, c, q, qw, eps);
    else ew_quant_launch<CU_T_Q8_K>((cudaStream_t)s, tail, dst, x, E, rows, c, q, qw, eps);
    return cu_after_launch(norm ? "k_ew_quant_rows (norm)" : "k_ew_quant_rows");
}

/* dst [rows, E] = softmax of each row of x (ops_ref.c's op_softmax: the row's max subtracted, expf,
 * the sum in double, every value times the sum's f32 reciprocal): a 256-thread block a row; each
 * thread rewrites only the values it read, so dst may be x */
__global__ void __launch_bounds__(256) k_softmax(float *dst, const float *x, int64_t E) {
    CU_PDL_ENTRY();
    __shared__ float smax[8];
    __shared__ double ssum[8];
    const int tid = threadIdx.x, lane = tid & 31, wp = tid >> 5;
    const float *xr = x + (int64_t)blockIdx.x * E;
    float *y = dst + (int64_t)blockIdx.x * E;
    float mx = -INFINITY;
    for (int64_t i = tid; i < E; i += 256) mx = xr[i] > mx ? xr[i] : mx;
    mx = warp_max(mx);
    if (lane == 0) smax[wp] = mx;
    __syncthreads();
    mx = smax[0];
    for (int k = 1; k < 8; k++) mx = smax[k] > mx ? smax[k] : mx;
    double sum = 0.0;
    for (int64_t i = tid; i < E; i += 256) {
        const float e = expf(xr[i] - mx);
        y[i] = e;
        sum += (double)e;
    }
    sum = block_sum_d<8>(sum, ssum);
    const float inv = (float)(1.0 / sum);
    for (int64_t i = tid; i < E; i += 256) y[i] *= inv;
}

extern "C" sb_status cu_softmax(cu_stream s, float *dst, const float *x, int64_t E, int64_t rows) {
    if (rows <= 0 || E <= 0) return SB_OK;
    if (rows > 0x7FFFFFFF) return sb_fail(SB_ERR_UNSUPPORTED, "cuda: softmax over %lld rows (at most 2^31 - 1)", (long long)rows);
    cu_launch(k_softmax, (unsigned)rows, 256, (cudaStream_t)s, dst, x, E);
    return cu_after_launch("k_softmax");
}

// ---- the tensor ABI's ops (device/tensor_ops.cuh) ----

__global__ void __launch_bounds__(LN_THREADS) k_layer_norm(float *dst, const float *x, int64_t E, float eps) {
    CU_PDL_ENTRY();
    __shared__ double part[LN_THREADS / 32];
    layer_norm_row(dst + (int64_t)blockIdx.x * E, x + (int64_t)blockIdx.x * E, E, eps, part);
}

extern "C" sb_status cu_layer_norm(cu_stream s, float *dst, const float *x, int64_t E, int64_t rows, float eps) {
    if (rows <= 0 || E <= 0) return SB_OK;
    if (rows > 0x7FFFFFFF) return sb_fail(SB_ERR_UNSUPPORTED, "cuda: layer_norm over %lld rows (at most 2^31 - 1)", (long long)rows);
    cu_launch(k_layer_norm, (unsigned)rows, LN_THREADS, (cudaStream_t)s, dst, x, E, eps);
    return cu_after_launch("k_layer_norm");
}

__global__ void __launch_bounds__(COPY_THREADS) k_gelu_erf(float *dst, const float *x, int64_t n) {
    CU_PDL_ENTRY();
    gelu_elems(dst, x, n);
}

extern "C" sb_status cu_gelu_erf(cu_stream s, float *dst, const float *x, int64_t n) {
    if (n <= 0) return SB_OK;
    cu_launch(k_gelu_erf, tensor_copy_grid(n, 1, COPY_MAX_X, 1), COPY_THREADS, (cudaStream_t)s, dst, x, n);
    return cu_after_launch("k_gelu_erf");
}

__global__ void __launch_bounds__(COPY_THREADS) k_concat(float *dst, concat_args a) {
    CU_PDL_ENTRY();
    concat_elems(dst, a);
}

extern "C" sb_status cu_concat(cu_stream s, float *dst, const float *const *src, const int64_t *chunk, int n, int64_t outer) {
    if (n < 1 || n > CONCAT_MAX_SRC) return sb_fail(SB_ERR_UNSUPPORTED, "cuda: concat of %d sources (1..%d)", n, CONCAT_MAX_SRC);
    concat_args a = {};
    a.n = n, a.outer = outer;
    for (int i = 0; i < n; i++) a.src[i] = src[i], a.chunk[i] = chunk[i], a.total += chunk[i];
    if (a.total <= 0 || outer <= 0) return SB_OK;
    cu_launch(k_concat, tensor_copy_grid(a.total, outer, COPY_MAX_X, COPY_MAX_Y), COPY_THREADS, (cudaStream_t)s, dst, a);
    return cu_after_launch("k_concat");
}

__global__ void __launch_bounds__(COPY_THREADS) k_permute(float *dst, const float *x, permute_args a) {
    CU_PDL_ENTRY();
    permute_elems(dst, x, a);
}

extern "C" sb_status cu_permute(cu_stream s, float *dst, const float *x, const int64_t ne[4], const int32_t perm[4]) {
    const permute_args a = permute_args_of(ne, perm);
    const int64_t rows = a.on[1] * a.on[2] * a.on[3];
    if (a.on[0] <= 0 || rows <= 0) return SB_OK;
    cu_launch(k_permute, tensor_copy_grid(a.on[0], rows, COPY_MAX_X, COPY_MAX_Y), COPY_THREADS, (cudaStream_t)s, dst, x, a);
    return cu_after_launch("k_permute");
}

__global__ void k_glu(float *dst, const float *g, const float *u, int64_t n, int gelu) {
    CU_PDL_ENTRY();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    dst[i] = cu_glu(g[i], u[i], gelu);
}

extern "C" sb_status cu_glu(cu_stream s, float *dst, const float *g, const float *u, int64_t n, bool gelu) {
    if (n <= 0) return SB_OK;
    cu_launch(k_glu, cu_div_up(n, 256), 256, (cudaStream_t)s, dst, g, u, n, gelu ? 1 : 0);
    return cu_after_launch("k_glu");
}

extern "C" bool cu_can_dequantize(int type) {
    switch (type) {
    case CU_T_F32: case CU_T_F16: case CU_T_BF16: case CU_T_Q4_0: case CU_T_Q4_1: case CU_T_Q5_0: case CU_T_Q5_1:
    case CU_T_Q8_0: case CU_T_Q2_K: case CU_T_Q3_K: case CU_T_Q4_K: case CU_T_Q5_K: case CU_T_Q6_K: case CU_T_IQ4_NL:
    case CU_T_IQ4_XS: return true;
    default: return false;
    }
}
