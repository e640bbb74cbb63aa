/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/cu_config.c — the CUDA backend's defaults, the per-thread binding, and the one
 * parser of SB_TUNE strings (cu_config.h).
 * Layer 0 (backend/cuda).
 */
#include "backend/cuda/cu_config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

const cu_config cu_config_default = {
    .graphs = 1, .direct_out = 1, .pdl = 1, .codegen = 1,
    .fuse = 1, .fuse_ropek = 1, .fuse_glu_pair = 1, .rope_inplace = 1, .mma_group = 1, .mma_pair = 1,
    .mma_glu_pair = 1, .rope_jobs = 1, .group_jobs = 1, .norm_sums = 1, .chain_quant = 8,
    .attn_variant = 4, .attn_splits = 2, .attn_kmin = 64, .attn_warp = 1 << 30, .attn_small = 128,
    .attn_class = 1, .attn_deep = 1, .attn_deep_kmin = 32, .attn_pre = 1, .attn_gqa = 8,
    .fattn_groups = 2, .fattn_split = 1, .fattn_mma = 1, .fattn_mma_tmin = 1, .fattn_ws = 1, .fattn_ws_warps = 8,
    .mmq = 4, .mma_min_t = 3, .mma_small = 2, .mma_small_tmax = 512, .mma_split_waves = 1, .mma_group_split = 1, .mmh = 1, .blas_min_t = 64, .blas_quant = 256, .mmf_tile = 9,
    .gemv_reg = 1, .gemv_reg_mix = 1, .gemv_reg_one = 1, .gf_rows = 1, .gf_prefetch = 1, .gf_warps = 4,
    .head_rows = 2, .norm_rows = 1,
};

static _Thread_local const cu_config *bound;

const cu_config *cu_cfg(void) { return bound ? bound : &cu_config_default; }

const cu_config *cu_cfg_bind(const cu_config *c) {
    const cu_config *prev = bound;
    bound = c;
    return prev;
}

typedef struct tune_key {
    const char *name;
    size_t off;
    int64_t lo, hi;
} tune_key;

#define K(f, lo, hi) {#f, offsetof(cu_config, f), lo, hi}
static const tune_key keys[] = {
    K(graphs, 0, 1), K(direct_out, 0, 1), K(pdl, 0, 1), K(poison, 0, 1), K(profile, 0, 1), K(act_q8_1, 0, 1),
    K(codegen, 0, 2), K(codegen_hand1, 0, 1),
    K(fuse, 0, 1), K(fuse_ropek, 0, 1), K(fuse_glu_pair, 0, 1), K(rope_inplace, 0, 2), K(mma_group, 0, 2),
    K(mma_pair, 0, 1), K(mma_glu_pair, 0, 1), K(rope_jobs, 0, 1), K(group_jobs, 0, 1),
    K(norm_sums, 0, 1), K(chain_quant, 0, 1 << 20),
    K(attn_variant, 1, 4), K(attn_splits, 1, 64), K(attn_kmin, 1, 1 << 20), K(attn_hpb, 0, 64),
    K(attn_warp, 0, 1 << 30), K(attn_small, 0, 128), K(attn_class, 0, 1), K(attn_deep, 0, 1),
    K(attn_deep_kmin, 32, 128), K(attn_pre, 0, 1), K(attn_gqa, 0, 8),
    K(fattn_groups, 1, 2), K(fattn_split, 0, 1), K(fattn_mma, 0, 1), K(fattn_mma_tmin, 1, 1 << 20), K(fattn_ws, 0, 1),
    K(fattn_ws_warps, 4, 8),
    K(mmq, 1, 4), K(mma_tile, 0, 3), K(mma_min_t, 2, 1 << 20), K(mma_small, 0, 2), K(mma_small_tmax, 9, 1 << 20),
    K(mma_split_waves, 0, 1), K(mma_group_split, 0, 1), K(mmh, 0, 1), K(mmh_big, 0, 1 << 20), K(blas_min_t, 0, 1 << 20), K(blas_quant, 0, 1 << 20),
    K(mmf_tile, 0, 1 << 20),
    K(gemv_reg, 0, 1), K(gemv_reg_mix, 0, 1), K(gemv_reg_one, 0, 1), K(gemv_single, 0, 1),
    K(gf_rows, 1, 64), K(gf_prefetch, 0, 1), K(gf_warps, 4, 8), K(head_rows, 1, 4),
    K(act_fast, 0, 1), K(norm_rows, 0, 1),
};
#undef K

static sb_status tune_one(cu_config *c, const char *item, size_t len) {
    const char *eq = memchr(item, '=', len);
    if (!eq) return sb_fail(SB_ERR_INVALID_ARG, "SB_TUNE: \"%.*s\" is not key=value", (int)len, item);
    const size_t kl = (size_t)(eq - item);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const tune_key *k = &keys[i];
        if (strlen(k->name) != kl || memcmp(k->name, item, kl)) continue;
        char num[32];
        const size_t vl = len - kl - 1;
        if (vl == 0 || vl >= sizeof num)
            return sb_fail(SB_ERR_INVALID_ARG, "SB_TUNE: %s needs an integer value (%lld..%lld)", k->name, (long long)k->lo, (long long)k->hi);
        memcpy(num, eq + 1, vl);
        num[vl] = 0;
        char *end;
        errno = 0;
        const long long v = strtoll(num, &end, 10);
        if (errno || *end || v < k->lo || v > k->hi)
            return sb_fail(SB_ERR_INVALID_ARG, "SB_TUNE: %s=%s is not an integer in %lld..%lld", k->name, num, (long long)k->lo,
                           (long long)k->hi);
        *(int *)((char *)c + k->off) = (int)v;
        return SB_OK;
    }
    return sb_fail(SB_ERR_INVALID_ARG, "SB_TUNE: unknown key \"%.*s\" (the keys are cu_config's fields, backend/cuda/cu_config.h)",
                   (int)kl, item);
}

sb_status cu_config_tune(cu_config *c, const char *spec) {
    if (!spec) return SB_OK;
    cu_config t = *c;
    for (const char *p = spec; *p;) {
        const char *comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len) SB_TRY(tune_one(&t, p, len));
        p += len + (comma ? 1 : 0);
    }
    *c = t;
    return SB_OK;
}
