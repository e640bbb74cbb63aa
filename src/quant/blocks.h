/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * quant/blocks.h — the on-disk block structs of every implemented ggml block format, laid out
 * byte for byte as ggml-common.h lays them out (formats.md §2), plus the IQ4_NL value table.
 * Layer 1 (quant). Header-only, no code; usable from C11 and from CUDA C++ (nvcc / NVRTC).
 * Invariants: all multi-byte fields are little-endian; fp16 fields are raw uint16_t bits (convert
 * with quant/fp16.h); there is no padding — every size and offset is pinned by a static assert, so
 * a struct can be overlaid directly on GGUF tensor data (alignment 2, or 4 for Q8_K).
 * Element e of a block means the e-th fp32 value of the block in row order.
 * Non-goals: the IQ1/IQ2/IQ3/TQ/MXFP4/NVFP4 layouts (see formats.md §2.15), repacked layouts.
 */
#ifndef SB_QUANT_BLOCKS_H
#define SB_QUANT_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC_RTC__)
/* NVRTC (generated kernels, codegen/) has no constant offsetof; the host and nvcc builds of this
 * same header already pin every layout */
#  define QK_STATIC_ASSERT(c, m)
#elif defined(__cplusplus)
#  define QK_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#  define QK_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

// ---- block sizes ----

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK4_NL 32
#define QK_K 256          /* super-block size of the K-quants, Q8_K and IQ4_XS */
#define K_SCALE_SIZE 12   /* packed 6-bit scale/min bytes of Q4_K/Q5_K (and Q3_K's scales) */

// ---- legacy 32-element formats ----

/* Q4_0, 18 B: y = (q - 8) * d.
 *   byte  0..1   d      fp16
 *   byte  2..17  qs[16] qs[j] = q[j] | q[j+16] << 4   (low nibble: element j, high: element j+16)
 */
typedef struct blk_q4_0 {
    uint16_t d;
    uint8_t qs[QK4_0 / 2];
} blk_q4_0;
QK_STATIC_ASSERT(sizeof(blk_q4_0) == 18, "blk_q4_0 must be 18 bytes");
QK_STATIC_ASSERT(offsetof(blk_q4_0, qs) == 2, "blk_q4_0.qs at 2");

/* Q4_1, 20 B: y = q * d + m.
 *   byte  0..1   d      fp16
 *   byte  2..3   m      fp16   (the block minimum)
 *   byte  4..19  qs[16] nibbles as in Q4_0
 */
typedef struct blk_q4_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qs[QK4_1 / 2];
} blk_q4_1;
QK_STATIC_ASSERT(sizeof(blk_q4_1) == 20, "blk_q4_1 must be 20 bytes");
QK_STATIC_ASSERT(offsetof(blk_q4_1, qs) == 4, "blk_q4_1.qs at 4");

/* Q5_0, 22 B: y = ((lo | hi << 4) - 16) * d.
 *   byte  0..1   d      fp16
 *   byte  2..5   qh[4]  u32 LE; bit e = bit 4 of element e
 *   byte  6..21  qs[16] low nibbles as in Q4_0
 */
typedef struct blk_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[QK5_0 / 2];
} blk_q5_0;
QK_STATIC_ASSERT(sizeof(blk_q5_0) == 22, "blk_q5_0 must be 22 bytes");
QK_STATIC_ASSERT(offsetof(blk_q5_0, qh) == 2 && offsetof(blk_q5_0, qs) == 6, "blk_q5_0 offsets");

/* Q5_1, 24 B: y = (lo | hi << 4) * d + m.
 *   byte  0..1   d      fp16
 *   byte  2..3   m      fp16
 *   byte  4..7   qh[4]  u32 LE; bit e = bit 4 of element e
 *   byte  8..23  qs[16] low nibbles as in Q4_0
 */
typedef struct blk_q5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
} blk_q5_1;
QK_STATIC_ASSERT(sizeof(blk_q5_1) == 24, "blk_q5_1 must be 24 bytes");
QK_STATIC_ASSERT(offsetof(blk_q5_1, qh) == 4 && offsetof(blk_q5_1, qs) == 8, "blk_q5_1 offsets");

/* Q8_0, 34 B: y = qs[e] * d.
 *   byte  0..1   d      fp16
 *   byte  2..33  qs[32] int8, element e at qs[e]
 */
typedef struct blk_q8_0 {
    uint16_t d;
    int8_t qs[QK8_0];
} blk_q8_0;
QK_STATIC_ASSERT(sizeof(blk_q8_0) == 34, "blk_q8_0 must be 34 bytes");

/* Q8_1, 36 B (activation format): y = qs[e] * d; s = d * sum(qs) on CPU (formats.md §2.6, §3.2).
 *   byte  0..1   d      fp16
 *   byte  2..3   s      fp16
 *   byte  4..35  qs[32] int8
 */
typedef struct blk_q8_1 {
    uint16_t d;
    uint16_t s;
    int8_t qs[QK8_1];
} blk_q8_1;
QK_STATIC_ASSERT(sizeof(blk_q8_1) == 36, "blk_q8_1 must be 36 bytes");
QK_STATIC_ASSERT(offsetof(blk_q8_1, qs) == 4, "blk_q8_1.qs at 4");

// ---- K-quants (256-element super-blocks) ----

/* Q8_K, 292 B (activation format): y = qs[e] * d, d is fp32.
 *   byte   0..3    d          fp32
 *   byte   4..259  qs[256]    int8
 *   byte 260..291  bsums[16]  int16, bsums[g] = sum of qs[16g .. 16g+15]
 */
typedef struct blk_q8_K {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
} blk_q8_K;
QK_STATIC_ASSERT(sizeof(blk_q8_K) == 292, "blk_q8_K must be 292 bytes");
QK_STATIC_ASSERT(offsetof(blk_q8_K, bsums) == 260, "blk_q8_K.bsums at 260");

/* Q2_K, 84 B: 16 sub-blocks of 16; y = (d * (sc & 15)) * q - dmin * (sc >> 4), q in 0..3.
 *   byte  0..15  scales[16]  low nibble: scale of sub-block j, high nibble: its min
 *   byte 16..79  qs[64]      q of element e at qs[32*(e/128) + e%32], bits 2*((e%128)/32)
 *   byte 80..81  d           fp16 super-scale of the scales
 *   byte 82..83  dmin        fp16 super-scale of the mins
 */
typedef struct blk_q2_K {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    uint16_t d;
    uint16_t dmin;
} blk_q2_K;
QK_STATIC_ASSERT(sizeof(blk_q2_K) == 84, "blk_q2_K must be 84 bytes");
QK_STATIC_ASSERT(offsetof(blk_q2_K, qs) == 16 && offsetof(blk_q2_K, d) == 80, "blk_q2_K offsets");

/* Q3_K, 110 B: 16 sub-blocks of 16; y = (d * sc_j) * (low - (h ? 0 : 4)), sc_j = u_j - 32.
 *   byte   0..31   hmask[32]   bit e/32 of hmask[e%32] = high bit h of element e
 *   byte  32..95   qs[64]      low 2 bits, packed as Q2_K's qs
 *   byte  96..107  scales[12]  6-bit u_j: bytes 0..7 = lo4(u_j) | lo4(u_j+8) << 4;
 *                              bytes 8..11 = hi2 of u_{k}, u_{k+4}, u_{k+8}, u_{k+12} at bits 0,2,4,6
 *   byte 108..109  d           fp16
 */
typedef struct blk_q3_K {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[K_SCALE_SIZE];
    uint16_t d;
} blk_q3_K;
QK_STATIC_ASSERT(sizeof(blk_q3_K) == 110, "blk_q3_K must be 110 bytes");
QK_STATIC_ASSERT(offsetof(blk_q3_K, scales) == 96 && offsetof(blk_q3_K, d) == 108, "blk_q3_K offsets");

/* Q4_K, 144 B: 8 sub-blocks of 32; y = (d * sc_j) * q - (dmin * m_j), q in 0..15.
 *   byte   0..1    d           fp16
 *   byte   2..3    dmin        fp16
 *   byte   4..15   scales[12]  6-bit sc_j, m_j (get_scale_min_k4):
 *                              [0..3]  = sc0..3 (bits 0-5) | hi2(sc4..7) << 6
 *                              [4..7]  = m0..3  (bits 0-5) | hi2(m4..7)  << 6
 *                              [8..11] = lo4(sc4..7) | lo4(m4..7) << 4
 *   byte  16..143  qs[128]     chunk c (32 B): low nibbles = sub-block 2c, high = sub-block 2c+1
 */
typedef struct blk_q4_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qs[QK_K / 2];
} blk_q4_K;
QK_STATIC_ASSERT(sizeof(blk_q4_K) == 144, "blk_q4_K must be 144 bytes");
QK_STATIC_ASSERT(offsetof(blk_q4_K, scales) == 4 && offsetof(blk_q4_K, qs) == 16, "blk_q4_K offsets");

/* Q5_K, 176 B: as Q4_K plus a 5th bit; q in 0..31.
 *   byte   0..3    d, dmin     fp16, fp16
 *   byte   4..15   scales[12]  as Q4_K
 *   byte  16..47   qh[32]      bit j of qh[e%32] = bit 4 of element e of sub-block j (= e/32)
 *   byte  48..175  qs[128]     low nibbles as Q4_K
 */
typedef struct blk_q5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} blk_q5_K;
QK_STATIC_ASSERT(sizeof(blk_q5_K) == 176, "blk_q5_K must be 176 bytes");
QK_STATIC_ASSERT(offsetof(blk_q5_K, qh) == 16 && offsetof(blk_q5_K, qs) == 48, "blk_q5_K offsets");

/* Q6_K, 210 B: 16 sub-blocks of 16; y = (d * scales[e/16]) * ((lo | hi << 4) - 32).
 *   byte   0..127  ql[128]     n = e/128, r = e%128, g = r/32, l = r%32:
 *                              lo = ql[64n + l + 32*(g&1)] >> (4*(g>>1)) & 15
 *   byte 128..191  qh[64]      hi = qh[32n + l] >> (2g) & 3
 *   byte 192..207  scales[16]  int8
 *   byte 208..209  d           fp16
 */
typedef struct blk_q6_K {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d;
} blk_q6_K;
QK_STATIC_ASSERT(sizeof(blk_q6_K) == 210, "blk_q6_K must be 210 bytes");
QK_STATIC_ASSERT(offsetof(blk_q6_K, scales) == 192 && offsetof(blk_q6_K, d) == 208, "blk_q6_K offsets");

// ---- IQ4 (non-linear 4-bit) ----

/* The 16 IQ4 code points (ggml kvalues_iq4nl); y = d * kvalues_iq4nl[q]. */
static const int8_t kvalues_iq4nl[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

/* IQ4_NL, 18 B: y = d * kvalues_iq4nl[q].
 *   byte  0..1   d      fp16
 *   byte  2..17  qs[16] nibbles as in Q4_0
 */
typedef struct blk_iq4_nl {
    uint16_t d;
    uint8_t qs[QK4_NL / 2];
} blk_iq4_nl;
QK_STATIC_ASSERT(sizeof(blk_iq4_nl) == 18, "blk_iq4_nl must be 18 bytes");

/* IQ4_XS, 136 B: 8 sub-blocks of 32; y = (d * (ls_ib - 32)) * kvalues_iq4nl[q].
 *   byte   0..1    d            fp16
 *   byte   2..3    scales_h     u16: bits 2ib..2ib+1 = high 2 bits of ls_ib
 *   byte   4..7    scales_l[4]  nibble ib%2 of scales_l[ib/2] = low 4 bits of ls_ib
 *   byte   8..135  qs[128]      sub-block ib at qs[16ib ..]: nibbles as in Q4_0
 */
typedef struct blk_iq4_xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
} blk_iq4_xs;
QK_STATIC_ASSERT(sizeof(blk_iq4_xs) == 136, "blk_iq4_xs must be 136 bytes");
QK_STATIC_ASSERT(offsetof(blk_iq4_xs, scales_l) == 4 && offsetof(blk_iq4_xs, qs) == 8, "blk_iq4_xs offsets");

#endif
