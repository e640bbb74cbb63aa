/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/kernels.h — host launchers of the hand-written CUDA kernel families (k_*.cu) and
 * the device-memory / stream / graph wrappers (cu_mem.cu) the runtime's CUDA executor calls.
 * Layer 0 (backend/cuda): launchers take device pointers, shapes and type ids — never graphs.
 * Every launcher enqueues on stream `s` and returns SB_OK, or SB_ERR_DEVICE with the CUDA error
 * text (cudaGetLastError after the launch); nothing aborts, nothing synchronizes.
 * Shapes: ne[0] innermost; E row length, T tokens/rows, K matmul inner dim, N output rows,
 * D head_dim, Hq/Hkv heads, C cache length. All f32 unless a type id says otherwise.
 * Loading and launching NVRTC-generated kernels is cu_module.cu (cu_gen_*); generating them is
 * codegen/ (docs/codegen.md). Non-goals: multi-GPU.
 */
#ifndef SB_BACKEND_CUDA_KERNELS_H
#define SB_BACKEND_CUDA_KERNELS_H

#include "sonicboom.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CUstream_st *cu_stream;      /* == cudaStream_t */
typedef struct CUgraphExec_st *cu_graph;    /* == cudaGraphExec_t */

// ---- device memory, streams, graphs (cu_mem.cu) ----

sb_status cu_set_device(int dev);
/* SB_ERR_OOM "cuda: <what>: cudaMalloc of N bytes failed, F of T bytes free" on out-of-memory. */
sb_status cu_malloc(void **p, size_t bytes, const char *what);
void cu_free(void *p);
/* Page-locked host memory (fast, asynchronous copies); SB_ERR_OOM with the size on failure. */
sb_status cu_host_alloc(void **p, size_t bytes, const char *what);
void cu_host_free(void *p);
sb_status cu_memcpy_h2d(void *dst, const void *src, size_t bytes, cu_stream s);   /* async on s */
sb_status cu_memcpy_d2h(void *dst, const void *src, size_t bytes, cu_stream s);   /* waits for s */
sb_status cu_memcpy_d2d(void *dst, const void *src, size_t bytes, cu_stream s);   /* async on s; ranges apart */
sb_status cu_memcpy_d2h_async(void *dst, const void *src, size_t bytes, cu_stream s); /* async on s (dst page-locked) */
/* Is p inside page-locked host memory (cu_host_alloc)? Such memory is also a device address
 * (unified addressing): kernels may write it directly, and copies from and to it may be captured. */
bool cu_is_pinned(const void *p);
sb_status cu_memset(void *dst, int v, size_t bytes, cu_stream s);
sb_status cu_stream_create(cu_stream *s);
void cu_stream_destroy(cu_stream s);
sb_status cu_stream_sync(cu_stream s);
sb_status cu_graph_begin(cu_stream s);
/* Ends the capture on s and instantiates it; *g = NULL on failure. */
sb_status cu_graph_end(cu_stream s, cu_graph *g);
sb_status cu_graph_launch(cu_graph g, cu_stream s);
void cu_graph_destroy(cu_graph g);
sb_status cu_mem_info(size_t *free_b, size_t *total_b);
/* Timing events (profiling only): create n, record event i on s, milliseconds between a and b
 * (waits for b to complete). */
sb_status cu_events_create(void **ev, int n);
void cu_events_destroy(void **ev, int n);
sb_status cu_event_record(void *ev, cu_stream s);
sb_status cu_event_ms(void *a, void *b, float *ms);
int cu_sm_count(void);
/* Programmatic dependent launch for the launches of this thread (cu_launch.cuh): cu_config.pdl on a
 * compute capability >= 9.0 device running kernel code compiled for compute_90+ (cu_kernels_ptx_version:
 * the kernels' griddepcontrol.wait exists only there). */
bool cu_pdl_on(void);
int cu_cc_major(void);
/* Planning tests without a GPU: cu_cc_major and cu_sm_count answer cc_major and sms (0, 0: the
 * device again). Kernel choices made from them (the int8 MMA groups, K splits) then plan as they
 * would on that device; nothing may be launched. Process-wide. */
void cu_assume_device(int cc_major, int sms);
void cu_mma_forget_device(void); /* k_mma.cu's cached device properties, read again at next use */
/* x10 PTX architecture of the loaded kernel code (90 = compute_90; PDL needs >= 90); 0 unknown. */
int cu_kernels_ptx_version(void);

// ---- capabilities ----

/* Can cu_get_rows / cu_matmul_f32 read weights of `type` (per-element dequantization)? */
bool cu_can_dequantize(int type);
/* Does cu_matmul_q8 have a dp4a dot for weights of `type` against q8_1 activations? */
bool cu_has_mmvq(int type);
/* ... and against q8_K (the 256-value super-block types: Q2_K..Q6_K, IQ4_XS)? */
bool cu_has_mmvq_q8k(int type);

// ---- rows / elementwise (k_rows.cu) ----

/* dst [E,T] = rows tok[t] of w [E,V] (type wtype, row_bytes per row), dequantized; tok NULL: rows
 * 0..T-1 of w (rows the host gathered in token order). */
sb_status cu_get_rows(cu_stream s, float *dst, const void *w, int wtype, int64_t E, uint64_t row_bytes,
                      const int32_t *tok, int64_t T);
/* dst [E,n] = x rows idx[i]. */
sb_status cu_select_rows(cu_stream s, float *dst, const float *x, int64_t E, const int32_t *idx, int64_t n);
/* dst [E,n,outer] = x [E,b,outer] rows start..start+n-1 of each of the outer groups (op_slice). */
sb_status cu_slice_rows(cu_stream s, float *dst, const float *x, int64_t E, int64_t b, int64_t start, int64_t n, int64_t outer);

/* One step of a row-wise chain (the FUSED node, and every single elementwise op as a chain of 1). */
enum { CU_EW_ADD = 1, CU_EW_MUL, CU_EW_SCALE, CU_EW_SOFTCAP, CU_EW_SILU, CU_EW_GELU, CU_EW_RMS_NORM };
#define CU_MAX_STEPS 7
typedef struct cu_ew_step {
    int op;             /* CU_EW_* */
    int bcast;          /* operand is one row [E] broadcast over rows (else same shape as x) */
    float f;            /* eps / scale / cap */
    const float *opd;   /* ADD/MUL operand or NULL */
} cu_ew_step;
typedef struct cu_ew_chain {
    int n;
    cu_ew_step st[CU_MAX_STEPS];
} cu_ew_chain;
/* dst [E,rows] = chain(x); dst may be x. */
sb_status cu_ew_rows(cu_stream s, float *dst, const float *x, int64_t E, int64_t rows, const cu_ew_chain *c);
/* cu_ew_rows, then each row of dst quantized to xq (SB_TYPE_Q8_1 or SB_TYPE_Q8_K, E whole blocks)
 * into q: as it is (norm false) or rms_norm(row) [* qw] with eps — the FUSED node's quantize tail
 * (pass fuse_chain_quant), bit-identical to cu_ew_rows followed by cu_quantize_act /
 * cu_rms_norm_quant (k_rows.cu). q must not overlap dst, x or the operands. */
sb_status cu_ew_quant_rows(cu_stream s, float *dst, const float *x, int64_t E, int64_t rows, const cu_ew_chain *c, int xq, void *q, bool norm,
                           const float *qw, float eps);
/* dst = act(g) * u over n values (gelu: ggml's fp16-table GELU, else SiLU). */
sb_status cu_glu(cu_stream s, float *dst, const float *g, const float *u, int64_t n, bool gelu);
/* dst [rows, E] = softmax over each row of x (ops_ref.c's op_softmax; dst may be x). */
sb_status cu_softmax(cu_stream s, float *dst, const float *x, int64_t E, int64_t rows);
/* The tensor ABI's ops (k_rows.cu, device/tensor_ops.cuh), each ops_ref.c's: dst [E, rows] =
 * op_layer_norm of each row of x (dst may be x); dst = op_gelu(x) over n values (the exact erf GELU,
 * in double); dst = op_concat of n (1..8) f32 sources, row o of dst being chunk[i] values of each
 * source i in turn; dst = op_permute of x [ne] (dst.ne[k] = ne[perm[k]]). */
sb_status cu_layer_norm(cu_stream s, float *dst, const float *x, int64_t E, int64_t rows, float eps);
sb_status cu_gelu_erf(cu_stream s, float *dst, const float *x, int64_t n);
sb_status cu_concat(cu_stream s, float *dst, const float *const *src, const int64_t *chunk, int n, int64_t outer);
sb_status cu_permute(cu_stream s, float *dst, const float *x, const int64_t ne[4], const int32_t perm[4]);

// ---- 8-bit activations (k_quantize.cu) ----
/* xq = SB_TYPE_Q8_1 (formats.md §3.2 CUDA semantics: s = F16(sum x)) or SB_TYPE_Q8_K (the CPU
 * reference quantize_row_q8_K_ref, bit for bit; E % 256 == 0). */

sb_status cu_quantize_act(cu_stream s, int xq, void *dst, const float *x, int64_t E, int64_t rows);
/* dst = quantize(rms_norm(x) [* w]); w may be NULL. */
sb_status cu_rms_norm_quant(cu_stream s, int xq, void *dst, const float *x, const float *w, int64_t E, int64_t rows, float eps);
/* Residual add + RMSNorm + quantize in one kernel (executor fusion of ADD then RMS_NORM_QUANT):
 * sum = x + b (f32, written to sum_out, which may be x or b itself), dst = quantize(rms_norm(sum) [* w]).
 * Bit-identical to cu_ew_rows(ADD) then cu_rms_norm_quant. dst must not overlap x, b or sum_out. */
sb_status cu_add_rms_norm_quant(cu_stream s, int xq, void *dst, float *sum_out, const float *x, const float *b, const float *w, int64_t E,
                                int64_t rows, float eps);
/* dst = quantize(act(g) * u). */
sb_status cu_glu_quant(cu_stream s, int xq, void *dst, const float *g, const float *u, int64_t E, int64_t rows, bool gelu);

// ---- matmul (k_mmvq.cu, k_mmf.cu) ----

/* Optional GEMV epilogue: y[n,t] = (W x)[n,t] + add[n] (bcast: a bias) or + add[t*N + n] (a
 * residual of the output's shape; add may be dst itself). NULL = none. nonfinite (NULL = none;
 * cu_matmul_q8 at T == 1 and the int8 MMA GEMMs, cu_matmul_mma*, whose split reduces flag too;
 * the others, partials left to a consumer and paired gate/up launches fail on it): set to 1 when a
 * value written is NaN or infinite — never cleared, so the caller zeroes it before the launch (an
 * LM head's logits checked where they are computed, not read again by the host). */
typedef struct cu_epilogue {
    const float *add;
    int bcast;
    unsigned *nonfinite;
} cu_epilogue;

/* The raw split-K partials of one GEMM segment, left unreduced (cu_matmul_mma_multi with srcs):
 * element o of its [N, T] result is the sum of part[z * TN + o] over z = 0..nsplit-1 in order, then
 * plus the epilogue — k_mma_reduce's arithmetic, so a consumer that sums them gets the same bits. */
typedef struct cu_split_src {
    const float *part;
    int nsplit;
    int64_t TN, N;
    cu_epilogue ep;
} cu_split_src;

/* cu_rms_norm_quant of rows whose values are the split-K partials of a GEMM (cu_matmul_mma_multi
 * with srcs, one segment of N = E and T = rows): row t element i = the sum of the partials plus the
 * epilogue in k_mma_reduce's order, written to sum_out (the GEMM's destination), then normalized
 * and quantized — the bits of k_mma_reduce followed by cu_rms_norm_quant. sum_out may be the
 * epilogue's operand exactly; dst overlaps neither. */
sb_status cu_rms_norm_quant_split(cu_stream s, int xq, void *dst, float *sum_out, const cu_split_src *src, const float *w, int64_t E,
                                  int64_t rows, float eps);
/* does cu_rms_norm_quant of rows x E into xq take the 256-thread rows kernel (more rows than one
 * wave of 1024-thread blocks)? cu_rms_norm_quant_split is the 1024-thread kernel at any count. */
bool cu_norm_rows_fit(int xq, int64_t E, int64_t rows);

/* dst [N,T] = W x: w [K,N] of wtype (cu_has_mmvq), xq [K,T] of xtype: Q8_1 (any cu_has_mmvq type)
 * or Q8_K (Q4_K, Q5_K, Q6_K). */
sb_status cu_matmul_q8(cu_stream s, float *dst, const void *w, int wtype, int64_t K, int64_t N, const void *xq, int xtype, int64_t T,
                       const cu_epilogue *ep);
/* Several GEMVs over one activation in one launch (executor fusion: Q/K/V, gate/up; or one matrix),
 * T = 1 only (k_gemv_fused). Segment k: dst_k [N_k] = W_k x (+ epilogue), W_k [K, N_k] of its own
 * type (any cu_has_mmvq type with Q8_1 activations; Q4_K/Q5_K/Q6_K with Q8_K); with cache != NULL
 * the result is also written to column pos[0] of that KV cache [N_k, C] (F32 or F16: the V
 * kv_store folded in). Rows are the warp computations of cu_matmul_q8 at T = 1 (one warp a row, or
 * four for K > CU_MMVQ_LONG_K), so results are bit-identical to it.
 * The activation: xtype blocks at xq. pair_glu 1 (SiLU) or 2 (GELU): the launch's two segments are an
 * FFN's gate and up (one N and weight type, no cache or RoPE, K <= 8192; cu_gemv_reg_fits with
 * pair_glu) taken row by row, and act(gate) * up — cu_glu_quant's f32 values — goes to segment
 * 0's dst (segment 1's is not written); 0: plain segments. */
#define CU_MULTI_MAX 3
#define CU_MMVQ_LONG_K 2048 /* T = 1 GEMVs with K above this split each row over 4 warps */
typedef struct cu_gemv_seg {
    float *dst;
    const void *w;
    int wtype;
    int64_t N;
    cu_epilogue ep;
    void *cache; /* NULL or a KV cache to write too */
    int ctype;   /* its type: F32 or F16 */
    const int32_t *rows; /* the cache row written (rows[0], a paged cache's slot), or NULL: pos[0] */
    int64_t ring;        /* the cache is a sliding-window ring of this many rows: row kv_row(rows[0], ring); 0: linear */
    /* rot > 0: RoPE the result (heads of D rows) before the cache write — K's rope + kv_store folded
     * into the launch; the same math as k_rope_store. dst is then not written. */
    int rot, rmode, D;
    float theta_scale, freq_scale, attn_factor;
    const float *ff;
} cu_gemv_seg;
sb_status cu_matmul_q8_multi(cu_stream s, const cu_gemv_seg *seg, int n, int64_t K, const void *xq, int xtype, const int32_t *pos,
                             int pair_glu);
/* k_gemv_fused's launch shape: cu_config gf_rows, gf_prefetch, gf_warps. */
/* Registers before the wait (k_gemv_reg; cu_config gemv_reg, gemv_reg_mix, gemv_reg_one): launches whose
 * segments share one weight type (or mix one with its Q/K/V partner) fetch their weights into registers
 * before the PDL wait. */
bool cu_gemv_reg_fits(const cu_gemv_seg *seg, int n, int64_t K, int xtype, bool pair_glu);
/* the one-row-in-registers quantization kernels (act_build) for rows of up to 8192 values
 * (cu_config.act_fast; off: the 1024-thread loop kernels); the current setting (codegen: the layout a generated norm quantizer must match) */
bool cu_act_fast(void);
/* RMSNorm -> q8_1 rows of at most 1024 values go to a 256-thread block with the 1024-thread kernel's
 * summation order (bit-identical; k_quantize.cu) when there are more rows than two an SM (cu_config.norm_rows). */
/* The token-tile GEMV for T > 8 (cu_config.mmq): 1 one row per warp, 2 four rows per warp sharing
 * activation loads, 3 (and 4 outside the int8 MMA) the shared-memory tiled GEMM (k_mmvq.cu). Rows a warp
 * of a T = 1 GEMV over at least 65536 rows (an LM head): cu_config.head_rows, the same bits every way. */
/* dst [N,T] = W x: w [K,N] of any cu_can_dequantize type, x [K,T] f32 or (xtype Q8_K) q8_K blocks. */
/* F16 / BF16 weights take the half-weight kernels (k_mmh1 / k_mmh: device/mmh.cuh) when cu_config.mmh, else k_mmf;
 * F32 weights with f32 activations and T > 8 the tiled f32 GEMM (k_mmft: device/mmf_tile.cuh) from T = cu_config.mmf_tile. */
sb_status cu_matmul_f32(cu_stream s, float *dst, const void *w, int wtype, int64_t K, int64_t N, const void *x, int xtype, int64_t T,
                        const cu_epilogue *ep);

// ---- large-T GEMMs through cuBLASLt (k_blas.cu, cu_blaslt.h) ----

/* Weight rows one chunk of a quantized cu_matmul_blas dequantizes at most (their F16 copy's bytes). */
#define CU_BLAS_CHUNK_BYTES ((uint64_t)64 << 20)
/* Does cu_matmul_blas take weights of wtype (F16, BF16, or a dp4a type: dequantized to F16)? */
bool cu_blas_takes(int wtype);
/* Does the executor take cu_matmul_blas for weights of wtype at T tokens with f32 activations:
 * F16 / BF16 from T = cu_config.blas_min_t, a quantized cu_blas_takes type from T =
 * cu_config.blas_quant (0: never), and cuBLASLt available (cu_blaslt_available)? */
bool cu_blas_on(int wtype, int64_t T);
/* Bytes of scratch cu_matmul_blas needs: x as halves, then (quantized) one chunk of F16 rows. */
uint64_t cu_blas_scratch_bytes(int wtype, int64_t K, int64_t N, int64_t T);
/* Launches of our own it enqueues (cuBLASLt's kernels counted as one a GEMM). */
int cu_blas_launches(int wtype, int64_t K, int64_t N, const cu_epilogue *ep);
/* dst [N,T] = W x (+ epilogue, as cu_matmul_f32's): w [K,N] of wtype (cu_blas_takes; quantized: K %
 * 32 == 0), x [K,T] f32 rounded to F16 (BF16 for BF16 weights), F32 accumulation on cuBLASLt;
 * scratch of cu_blas_scratch_bytes (16-byte aligned), workspace of CU_BLASLT_WORKSPACE bytes.
 * Legal inside stream capture. Error: SB_ERR_UNSUPPORTED (type, no cuBLASLt or no algorithm: dst
 * untouched, the caller may take another kernel), SB_ERR_INTERNAL (scratch short), SB_ERR_DEVICE. */
sb_status cu_matmul_blas(cu_stream s, float *dst, const void *w, int wtype, int64_t K, int64_t N, const float *x, int64_t T,
                         const cu_epilogue *ep, void *scratch, uint64_t scratch_bytes, void *workspace);

// ---- rope, kv, attention (k_rope.cu, k_attention.cu) ----

typedef struct cu_rope_args {
    int64_t D, H, T;
    int n_rot, mode;          /* mode 0 normal, 2 neox */
    float theta_scale;        /* freq_base^(-2/n_rot), computed on the host (powf, as the CPU) */
    float freq_scale, attn_factor;
    const float *ff;          /* [n_rot/2] or NULL */
    void *cache;              /* NULL, or write the result straight into this KV cache [H*D, C] at column */
    int ctype;                /* pos[t] (F32 or F16) instead of dst: rope + kv_store in one kernel */
    const int32_t *rows;      /* with cache: column rows[t] instead (a paged cache's slots; rotation still at pos[t]), NULL: pos[t] */
    int64_t ring;             /* with cache: a sliding-window ring of this many rows, the column taken mod ring
                               * (device/common.cuh kv_row); 0: a linear cache */
} cu_rope_args;
sb_status cu_rope(cu_stream s, float *dst, const float *x, const int32_t *pos, const cu_rope_args *a);
/* cache [Dkv,C] (F32 or F16) column pos[t] = x[:,t]; ring > 0: a sliding-window ring of C = ring rows,
 * column pos[t] mod ring. */
sb_status cu_kv_store(cu_stream s, void *cache, int ctype, int64_t Dkv, const float *x, const int32_t *pos, int64_t T, int64_t ring);
/* Up to CU_ROPE_JOBS_MAX of the two above in one launch (a prefill layer's K rope + cache write, V
 * cache write and Q rope, which the executor finds side by side): each job the very math of its
 * own cu_rope (store false: a.cache NULL writes dst, else the cache) or cu_kv_store (store true: x
 * [a.D, a.T] into a.cache of a.ctype), so the same bits. Rotations read pos; a cache write goes to
 * column a.rows[t] where a.rows is set, else pos[t] (mod a.ring for a ring). No job may write memory another reads. */
#define CU_ROPE_JOBS_MAX 4
typedef struct cu_rope_job {
    bool store;
    float *dst;
    const float *x;
    cu_split_src src; /* src.part: x read as the unreduced partials of the GEMM that computes it */
    cu_rope_args a;
} cu_rope_job;
sb_status cu_rope_jobs(cu_stream s, const cu_rope_job *jobs, int n, const int32_t *pos);

/* Q's RoPE applied by an attention kernel as it loads q (the executor's fusion of the ROPE before the
 * attention, pass fuse_attn_rope; cu_rope's math bit for bit, at each token's pos[t]): n_rot = 0
 * none, else q is the unrotated [D,Hq,T]. One struct for cu_attn_args and cu_attn_paged_args. */
typedef struct cu_attn_rope {
    int n_rot, mode;   /* mode 0 normal, 2 neox */
    float theta_scale; /* freq_base^(-2/n_rot), computed on the host (powf, as the CPU) */
    float freq_scale, attn_factor;
    const float *ff;   /* [n_rot/2] or NULL */
} cu_attn_rope;

typedef struct cu_attn_args {
    int64_t D, Hq, Hkv, T;
    int ctype;                /* F32 | F16 */
    float scale, softcap;     /* softcap 0 = none */
    int window;               /* 0 = none */
    int64_t ring;             /* the caches are sliding-window rings of this many rows (>= window + T - 1): key j
                               * at row j mod ring (device/common.cuh kv_row; masks stay on positions); 0: linear */
    int nsplit;               /* KV splits (flash-decoding); 1 = none */
    int variant;              /* 1 = key per warp step, 2 (default) = 32 keys per warp step (k_attention.cu); 4 = for
                               * T == 1 one block per (kv head, split), splits active by depth (k_attn_decode.cu),
                               * else as 2 */
    int kmin;                 /* variant 4: fewest keys per split (0 = CU_ATT_DEC_KMIN) */
    int hpb;                  /* variant 4: query heads per block; 0 = auto (1 while those blocks fit one per SM, else
                               * all G = Hq/Hkv of a kv head); n > 0 forces min(n, G) at every depth */
    int64_t ctx;              /* variant 4: rows of the k/v caches (0 = unknown: no key loads before pos is read); a
                               * ring's rows, which hold positions 0..ctx-1 until it wraps */
    int warp;                 /* variant 4: up to this depth (keys in the window) one block a query head with warps
                               * over 32-key chunks, lanes over keys, shuffles, no tiles (k_attn_decode.cu's warp
                               * path); 0 = off; only with one query head a block (hpb auto or 1) */
    int small;                /* variant 4: up to this depth (keys in the window, <= 128) the small-depth layout (one
                               * block a query head, the work of its keys spread over the 8 warps: 4 lanes a key
                               * for the scores, warps over keys for P.V, shared-memory reductions; taken before
                               * the warp path); 0 = off; only with one query head a block (hpb auto or 1) */
    int64_t depth_max;        /* variant 4, T == 1: the deepest (keys in the window) this launch will see, when the caller
                               * knows a bound (a captured graph per depth class); <= small: the small layout's own
                               * compact kernel. 0 = any depth */
    cu_attn_rope q_rope;      /* Q's RoPE as q is loaded (n_rot 0: none) */
    const int32_t *tbl;       /* variant 4, T == 1, a bounded depth: a paged cache (the batched engine's B = 1 step),
                               * key j at row tbl[j / bs] * bs + j % bs (cu_attn_decode_paged_fits); NULL: rows by ring */
    int bs;                   /* with tbl: rows a block */
    /* NULL, or also write the output as q8_1 blocks here (executor fusion of the QUANTIZE after the
     * attention; D % 32 == 0: each 32-block lies in one head) — the same bits as cu_quantize_act */
    void *xq;
} cu_attn_args;
/* Attention over a paged KV cache (k_attn_paged.cu): token t's logical position j lives at cache row
 * tbl[t * n_tbl + j / bs] * bs + j % bs (a ring: j mod ring). */
typedef struct cu_attn_paged_args {
    int64_t D, Hq, Hkv, T;
    int ctype;            /* F32 | F16 */
    float scale, softcap; /* softcap 0 = none */
    int window;           /* 0 = none */
    int bs;               /* rows per block */
    int64_t n_tbl;        /* table entries per token */
    int64_t ring;         /* > 0: no table (tbl unread), a contiguous sliding-window ring cache of this many rows
                           * (>= window + T - 1): position j at row j mod ring, as cu_attn_args.ring */
    int nsplit;           /* key splits S (flash-decoding, grid Hq x T x S); 0 or 1 = none, at most
                           * CU_ATT_PAGED_MAX_SPLITS */
    int kmin;             /* fewest keys a split (0 = CU_ATT_DEC_KMIN): na = ceil(n / max(kmin, ceil(n / S)))
                           * of the S splits are active at n visible keys */
    int hb;               /* 0: a block per query head (k_attn_paged); 1..8: the grouped kernel, hb query heads
                           * of one kv head a block, each K/V row read once for them (k_attn_paged_gqa: F16
                           * D 64 / 128 / 256 / 512, F32 D 64 / 128; hb | Hq / Hkv, hb <= 4 at D 512;
                           * S <= CU_ATT_PAGED_GQA_MAX_SPLITS) */
    cu_attn_rope q_rope;  /* Q's RoPE as q is loaded (n_rot 0: none) */
    void *xq;             /* non-NULL (D % 32 == 0): out's q8_1 blocks too, [D*Hq/32, T], as cu_quantize_act of
                           * out would write them (pass fuse_attn_quant) */
} cu_attn_paged_args;
#define CU_ATT_PAGED_MAX_SPLITS 32
#define CU_ATT_PAGED_GQA_MAX_SPLITS 128
/* Floats of scratch cu_attention_paged needs for these args: T * Hq * S * (D + 2) partials (hb > 0:
 * D + 4, 16-byte rows) with S > 1, else 0. */
uint64_t cu_attention_paged_scratch(const cu_attn_paged_args *a);
/* dst [D*Hq,T]; q [D,Hq,T]; k/v [D*Hkv, C]; pos [T], tbl [n_tbl, T] on the device; the table's
 * entries checked on the host (plan_check_paged); scratch (cu_attention_paged_scratch floats, NULL
 * when that is 0) for the splits' partials. S > 1: where cu_attention_paged_merges_in_kernel (cnt
 * given: CU_ATT_COUNTERS zeroed split counters, as cu_attention's), the last split block of each
 * (head or grouped block, token) to arrive merges the partials itself (one launch); else a merge
 * kernel runs after the split kernel (two launches) — the same bits either way where both can run.
 * S <= 1 one launch, no scratch.
 * SB_ERR_UNSUPPORTED: D odd or > 512, Hq % Hkv, S > CU_ATT_PAGED_MAX_SPLITS, xq with D % 32; with hb > 0 a
 * shape the grouped kernel does not take (cu_attention_paged_gqa_ok). */
sb_status cu_attention_paged(cu_stream s, float *dst, const float *q, const void *k, const void *v, const int32_t *pos,
                             const int32_t *tbl, const cu_attn_paged_args *a, float *scratch, unsigned *cnt);
/* Launches of cu_attention_paged for a (1 or 2): a split without the in-kernel merge takes two. */
int cu_attention_paged_launches(const cu_attn_paged_args *a, bool counters);
/* Does a split of a (S > 1; the per-head kernel, or the grouped one at D <= 128; T * Hq <= CU_ATT_COUNTERS)
 * merge in the kernel? */
bool cu_attention_paged_merges_in_kernel(const cu_attn_paged_args *a);
/* Does the grouped kernel take these args with hb heads a block (F16 cache of D 64 / 128 / 256 / 512 or
 * F32 of D 64 / 128; 1 <= hb <= 8 dividing Hq / Hkv, <= 4 at D 512)? The caller then sets a->hb = hb. */
bool cu_attention_paged_gqa_ok(const cu_attn_paged_args *a, int hb);
/* Split counters cu_attention's in-kernel split merge needs: zeroed device memory of this many
 * uint32 (T * Hq of them are used; the last split of each (t, h) resets its counter), shareable by
 * every attention of a stream (they run one after another). */
#define CU_ATT_COUNTERS 4096
/* Floats of scratch cu_attention needs for these args (0 when nsplit == 1). */
uint64_t cu_attention_scratch(const cu_attn_args *a);
/* Variant 4's default fewest keys per split: up to it one block per head block does the whole decode
 * attention (no partials, no merge); at depth 4096 it gives 64 splits of 64 keys (H200, F16 cache,
 * tg64 at depth 4096: kmin 64 713 tok/s, 128 678, 256 550). */
#define CU_ATT_DEC_KMIN 64
/* The largest head_dim cu_attention (and cu_attention_prefill) take; cu_attention_paged takes up to
 * CU_ATT_PAGED_MAX_D, and over a contiguous cache too (one block of all C rows, a table of zeros). */
#define CU_ATT_MAX_D 256
#define CU_ATT_PAGED_MAX_D 512
/* dst [D*Hq,T]; q [D,Hq,T]; k/v [D*Hkv, C]; pos [T] on the device; scratch per cu_attention_scratch.
 * counters (CU_ATT_COUNTERS zeroed uint32, or NULL): with nsplit > 1 the last split block of each
 * (t, h) merges the partials itself (one kernel); NULL (or T*Hq over the count) launches
 * k_attn_combine after it. Same arithmetic either way. */
sb_status cu_attention(cu_stream s, float *dst, const float *q, const void *k, const void *v, const int32_t *pos,
                       const cu_attn_args *a, float *scratch, unsigned *counters);
/* Variant 4's decode kernel (k_attn_decode.cu; cu_attention calls it for variant 4, T == 1 and
 * counters): a 1-D grid of (head block, split) blocks, hpb query heads a block (a->hpb); G = Hq/Hkv
 * <= 8, D <= 256, F32/F16 cache, nsplit <= 256, else SB_ERR_UNSUPPORTED naming the values. Scratch:
 * cu_attn_decode_scratch floats, Hkv*nsplit*max over the two modes of ceil(G/hpb)*(pad4(2hpb) +
 * hpb*D) >= Hq*nsplit*(D + 2) (so variant 2's fallback fits it too); 16-byte aligned. */
bool cu_attn_decode_fits(const cu_attn_args *a, const unsigned *counters, const float *scratch);
sb_status cu_attn_decode(cu_stream s, float *dst, const float *q, const void *k, const void *v, const int32_t *pos,
                         const cu_attn_args *a, float *scratch, unsigned *counters);
uint64_t cu_attn_decode_scratch(const cu_attn_args *a);
/* Does cu_attn_decode take a over a paged cache (a->bs > 0; a->tbl set at the launch, no ring): T == 1,
 * a depth bound a->depth_max > 0 that the small layout's own kernel takes (<= its keys) or k_attn_deep
 * does (cu_attn_deep_fits, rows of whole 16-byte chunks)? Then key j is read at row tbl[j / bs] * bs +
 * j % bs, and only positions <= pos[0] of the table are read. Else the caller keeps the paged kernel. */
bool cu_attn_decode_paged_fits(const cu_attn_args *a);
/* Decode attention at a bounded depth past the small layout (k_attn_deep.cu; cu_attn_decode takes it
 * when cu_attn_deep_fits: a->depth_max > a->small, splits, a shape it supports): a split kernel whose
 * K/V loads of earlier steps' rows are issued before its PDL wait, then a merge kernel. The executor
 * sets depth_max only in its depth classes (cu_config.attn_deep 0: none past the small one). */
bool cu_attn_deep_fits(const cu_attn_args *a);
uint64_t cu_attn_deep_scratch(const cu_attn_args *a); /* floats, the most of any class it takes up to a->ctx */
sb_status cu_attn_deep(cu_stream s, float *dst, const float *q, const void *k, const void *v, const int32_t *pos, const cu_attn_args *a,
                       float *scratch);
/* the small-depth kernel copies K/V before its PDL wait when cu_config.attn_pre */

// ---- prefill on tensor cores and flash attention (k_mma.cu, k_fattn.cu) ----

/* Is there an int8 tensor-core GEMM (mma.sync, sm_80+ device) for weights of wtype x activations
 * of xtype (Q8_1: Q4_0/Q5_0/Q8_0/Q4_K/Q5_K/Q6_K; Q8_K: the K-quants)? */
bool cu_has_mma(int wtype, int xtype);
/* the executor uses the int8 MMA GEMMs from T = cu_mma_min_t() where cu_has_mma (cu_config.mmq 4) */
bool cu_mma_on(void);
/* the fewest tokens the int8 MMA GEMMs take (cu_config.mma_min_t; fewer: the dp4a GEMVs) */
int64_t cu_mma_min_t(void);
/* Tile of cu_matmul_mma (cu_config.mma_tile): 0 chosen from the grid size, 1 = 128 rows x 64 tokens,
 * 2 = 64 x 64, 3 = 64 x 32. */
/* dst [N,T] = W x as cu_matmul_q8 (same operands, epilogue and results up to f32 summation
 * order), on int8 tensor cores; meant for T > 8 (smaller T: cu_matmul_mma_small). SB_ERR_UNSUPPORTED unless cu_has_mma. */
sb_status cu_matmul_mma(cu_stream s, float *dst, const void *w, int wtype, int64_t K, int64_t N, const void *xq, int xtype, int64_t T,
                        const cu_epilogue *ep);
/* The small-T path (cu_config.mma_small): 0 off, 1 the executor calls cu_matmul_mma_small instead of
 * cu_matmul_mma with its split counters, 2 the same without counters (the separate reduce kernel);
 * up to T = cu_config.mma_small_tmax; its split of K: the fewest waves of blocks x steps a block
 * (cu_config.mma_split_waves, k_mma.cu mma_small_split), else the most splits that keep one wave. */
int cu_mma_small_mode(void);
/* Floats of scratch cu_matmul_mma_small wants for (K, N, T) (0: no split of K). */
uint64_t cu_mma_small_scratch(int64_t K, int64_t N, int64_t T);
/* cu_matmul_mma (same operands, epilogue, results up to f32 summation order) for T up to the limit above, with
 * 32-row x 64-token tiles (T <= 8: 256 rows x 8 tokens) and K split across
 * blocks so that every SM has work (rule: k_mma.cu);
 * partials in scratch (scratch_floats of them; fewer than cu_mma_small_scratch: no split);
 * counters (CU_ATT_COUNTERS zeroed uint32, shareable with cu_attention, or NULL): the last split
 * block of each tile sums the partials (one kernel), NULL: a second reduce kernel. Larger T:
 * exactly cu_matmul_mma. */
sb_status cu_matmul_mma_small(cu_stream s, float *dst, const void *w, int wtype, int64_t K, int64_t N, const void *xq, int xtype,
                              int64_t T, const cu_epilogue *ep, float *scratch, uint64_t scratch_floats, unsigned *counters);
/* Several GEMMs over the same activations (a prefill plan's gate/up, K/V/Q) as one launch, of one
 * weight type or a cu_mma_pair: seg[q] gives each its weights, N, dst and epilogue (no cache or RoPE). Where the small-T
 * path splits K, each split as it would alone (the same split for every member), partials in
 * scratch, one reduce kernel after: each result equals its own cu_matmul_mma_small's bit for bit;
 * where their rows together do not split, the group unsplit. cu_mma_multi_split: 0 where one launch
 * does not take them (types, T under cu_mma_min_t(), sm < 80, members that would split differently, scratch_floats
 * short) — the caller launches them one by one —, else the split (1: none; > 1: a reduce follows). */
int cu_mma_multi_split(const cu_gemv_seg *seg, int n, int64_t K, int xtype, int64_t T, uint64_t scratch_floats);
/* may one int8 MMA launch mix weight types a and b? (equal; or Q4_0 / Q5_0 beside Q8_0 on q8_1
 * activations — a Q4_K_M file's V beside K and Q where rows are not 256-multiples) */
bool cu_mma_pair(int a, int b, int xtype);
/* groups that split K run as one launch (cu_config.mma_group_split; off: one by one) */
/* srcs NULL: as described; else, where the launch splits K, no reduce kernel: srcs[q] describes
 * segment q's partials (srcs[0].part NULL where it did not split: the results are in dst).
 * pair_glu 1 (SiLU) or 2 (GELU): seg[0] a gate, seg[1] its up (same rows and type, no epilogue) of a
 * launch that does not split (cu_mma_multi_split 1), of a type cu_mma_glu_pair_ok takes: seg[0].dst
 * gets act(gate) * up — cu_glu_quant's f32 values, bit for bit — and seg[1].dst is not written. */
sb_status cu_matmul_mma_multi(cu_stream s, const cu_gemv_seg *seg, int n, int64_t K, const void *xq, int xtype, int64_t T, float *scratch,
                              uint64_t scratch_floats, cu_split_src *srcs, int pair_glu);
/* the weight types a paired gate/up launch takes (Q4_0, Q5_0, Q8_0) */
bool cu_mma_glu_pair_ok(int wtype);
/* The flash prefills' common contract: T > 1, nsplit 1, Hq a multiple of Hkv > 0, an F32 or F16 cache. */
bool cu_fattn_args_ok(const cu_attn_args *a);
/* Can cu_attention_prefill run these args: that contract with head_dim <= 128 (k_fattn.cu), or what
 * the tensor-core kernel takes (cu_fattn_mma_takes: also head_dim 256 / 512, which only it runs)? */
bool cu_fattn_supported(const cu_attn_args *a);
/* Flash-attention prefill for head_dim <= 64 (cu_config.fattn_groups): 2 key groups of 4 warps over
 * 16-query tiles, or 1 group of 8 warps over 32 queries. */
/* Flash-attention prefill: the same contract and results (up to f32 summation order) as
 * cu_attention with nsplit 1, including Q's fused RoPE and the q8_1 output (a->xq). When the
 * (query tile, head) blocks would leave SMs idle (a few new tokens over a long cached prefix) and
 * scratch (scratch_floats of it, at least cu_fattn_scratch) and counters (CU_ATT_COUNTERS zeroed,
 * shareable, left zeroed) are given, the keys are split over blocks and the last split block of
 * each tile merges the partials; NULL / too little: no split. */
sb_status cu_attention_prefill(cu_stream s, float *dst, const float *q, const void *k, const void *v, const int32_t *pos,
                               const cu_attn_args *a, float *scratch, uint64_t scratch_floats, unsigned *counters);
/* floats of scratch cu_attention_prefill splits with for a (0: it would not split) */
uint64_t cu_fattn_scratch(const cu_attn_args *a);
/* the key split of the flash-attention prefill: cu_config.fattn_split */
/* The tensor-core flash-attention prefill (k_fattn_mma.cu; cu_config.fattn_mma, for more than
 * fattn_mma_tmin queries): F16 caches with head_dim 64, 128, 256 or 512 on sm_80+ (256 / 512 where
 * the per-block shared memory holds ~165 KB: sm_90) with f16 mma.sync (f16 Q and P,
 * f32 accumulation: ~1e-3 relative error); off: k_fattn.cu's f32 kernel. */
/* its 16-query blocks whose warps split the keys (k_fattn_ws) for at most 64 queries: cu_config.fattn_ws;
 * their warps a block at head_dim 64: cu_config.fattn_ws_warps (8 where the shared memory holds a ring
 * slot each, or 4) */
/* Does cu_attention_prefill take the tensor-core kernel for a (knob on, F16 cache, head_dim 64 / 128
 * / 256 / 512, sm_80+; it also needs 16-byte aligned caches, else k_fattn.cu runs up to 128 and
 * wider heads fail)? */
bool cu_fattn_mma_takes(const cu_attn_args *a);
/* floats of split partials the tensor-core kernel uses for a with the key split on/off (0: none) */
uint64_t cu_fattn_mma_scratch(const cu_attn_args *a, int split_on);
/* cu_attention_prefill's contract on tensor cores (cu_fattn_mma_takes and 16-byte aligned caches,
 * else SB_ERR_UNSUPPORTED); split_on: the key split (scratch / counters as cu_attention_prefill). */
sb_status cu_fattn_mma(cu_stream s, float *dst, const float *q, const void *k, const void *v, const int32_t *pos, const cu_attn_args *a,
                       int split_on, float *scratch, uint64_t scratch_floats, unsigned *counters);

// ---- generated kernels (cu_module.cu; the cubins come from codegen/, docs/codegen.md) ----

/* Load a cubin (or NUL-terminated PTX) image and get its kernel `name` (*fn, an opaque handle).
 * The image must stay valid for the process lifetime (codegen's cache guarantees it); a given
 * (image, name) is loaded once. SB_ERR_DEVICE with the CUDA error text. */
sb_status cu_gen_load(const void *image, const char *name, void **fn);
/* Launch fn on s with grid x block threads and its one by-value parameter *params (a cg_params),
 * with programmatic stream serialization like every other launch (cu_pdl_on). */
sb_status cu_gen_launch(cu_stream s, void *fn, unsigned grid, unsigned block, void *params);

#ifdef __cplusplus
}
#endif
#endif
