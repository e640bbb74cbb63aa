/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/imatrix.c — read and check llama.cpp's imatrix GGUF (imatrix.h).
 * Layer 2 (runtime). Every check fails with SB_ERR_FORMAT and one message "imatrix PATH: ...";
 * the GGUF container itself is checked by gguf_open (its own SB_ERR_FORMAT_* codes, with the
 * path added).
 */
#include "runtime/imatrix.h"
#include "base/status.h"
#include "format/gguf.h"
#include "quant/types.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char SUM2[] = ".in_sum2", COUNTS[] = ".counts", SUM[] = ".in_sum";

static bool has_suffix(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !memcmp(s + n - m, suf, m);
}

static int64_t n_elements(const gguf_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }

void rt_imatrix_free(rt_imatrix *m) {
    if (!m) return;
    for (int64_t i = 0; i < m->n; i++) {
        free(m->entries[i].name);
        free(m->entries[i].values);
    }
    free(m->entries);
    free(m->dataset);
    free(m->path);
    memset(m, 0, sizeof *m);
}

const rt_imatrix_entry *rt_imatrix_find(const rt_imatrix *m, const char *name) {
    for (int64_t i = 0; m && i < m->n; i++)
        if (!strcmp(m->entries[i].name, name)) return &m->entries[i];
    return NULL;
}

/* The tensor `base` + `suffix`, or NULL. */
static const gguf_tensor *companion(const gguf_file *f, const char *base, size_t base_len, const char *suffix) {
    char name[512];
    if (base_len + strlen(suffix) >= sizeof name) return NULL;
    memcpy(name, base, base_len);
    strcpy(name + base_len, suffix);
    return gguf_find_tensor(f, name);
}

static sb_status check_metadata(const gguf_file *f, const char *path, rt_imatrix *m) {
    static const char *const keys[] = {"imatrix.datasets", "imatrix.chunk_count", "imatrix.chunk_size"};
    for (int i = 0; i < 3; i++)
        if (!gguf_find(f, keys[i]))
            return sb_fail(SB_ERR_FORMAT, "imatrix %s: missing metadata key %s (not an llama-imatrix GGUF?)", path, keys[i]);
    const gguf_kv *ds = gguf_find(f, "imatrix.datasets");
    if (ds->type != SB_GGUF_ARRAY || ds->elem_type != SB_GGUF_STRING)
        return sb_fail(SB_ERR_FORMAT, "imatrix %s: imatrix.datasets is not an array of strings", path);
    for (int i = 1; i < 3; i++)
        if (gguf_find(f, keys[i])->type != SB_GGUF_UINT32)
            return sb_fail(SB_ERR_FORMAT, "imatrix %s: %s is a %s, not a u32", path, keys[i],
                           gguf_type_name(gguf_find(f, keys[i])->type));
    uint32_t cc = 0;
    (void)gguf_get_u32(f, "imatrix.chunk_count", &cc);
    m->chunk_count = cc;
    if (ds->count > 0) {
        const sb_strview v = ds->strs[0];
        m->dataset = (char *)malloc(v.len + 1);
        if (!m->dataset) return sb_fail(SB_ERR_OOM, "imatrix %s: dataset name of %zu bytes", path, v.len);
        memcpy(m->dataset, v.ptr, v.len);
        m->dataset[v.len] = 0;
    }
    return SB_OK;
}

/* Every tensor is NAME.in_sum2 / NAME.counts / NAME.in_sum, each with its in_sum2 partner. */
static sb_status check_names(const gguf_file *f, const char *path, int64_t *n_entries) {
    *n_entries = 0;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const char *nm = f->tensors[i].name;
        const char *suf = has_suffix(nm, SUM2) ? SUM2 : has_suffix(nm, COUNTS) ? COUNTS : has_suffix(nm, SUM) ? SUM : NULL;
        if (!suf)
            return sb_fail(SB_ERR_FORMAT, "imatrix %s: unexpected tensor \"%s\" (an imatrix holds NAME.in_sum2 and "
                           "NAME.counts per weight tensor)", path, nm);
        const size_t base = strlen(nm) - strlen(suf);
        if (base == 0) return sb_fail(SB_ERR_FORMAT, "imatrix %s: tensor \"%s\" has an empty weight name", path, nm);
        if (suf == SUM2) {
            (*n_entries)++;
            if (!companion(f, nm, base, COUNTS))
                return sb_fail(SB_ERR_FORMAT, "imatrix %s: mismatched sums and counts for %.*s (no %.*s%s)", path,
                               (int)base, nm, (int)base, nm, COUNTS);
        } else if (!companion(f, nm, base, SUM2)) {
            return sb_fail(SB_ERR_FORMAT, "imatrix %s: mismatched sums and counts for %.*s (no %.*s%s)", path,
                           (int)base, nm, (int)base, nm, SUM2);
        }
    }
    if (*n_entries == 0) return sb_fail(SB_ERR_FORMAT, "imatrix %s: no importance data (no NAME.in_sum2 tensor)", path);
    return SB_OK;
}

/* One entry from NAME.in_sum2 (sums) and NAME.counts, checked. */
static sb_status load_entry(const gguf_file *f, const char *path, const gguf_tensor *sums, rt_imatrix_entry *e) {
    const size_t base = strlen(sums->name) - strlen(SUM2);
    const gguf_tensor *counts = companion(f, sums->name, base, COUNTS), *act = companion(f, sums->name, base, SUM);
    const int nb = (int)base;
    const char *nm = sums->name;
    if (sums->type != SB_TYPE_F32 || counts->type != SB_TYPE_F32 || (act && act->type != SB_TYPE_F32))
        return sb_fail(SB_ERR_FORMAT, "imatrix %s: sums and counts for %.*s must be F32 (in_sum2 is %s, counts %s)", path,
                       nb, nm, sb_type_name(sums->type), sb_type_name(counts->type));
    if (sums->ne[2] != 1 || sums->ne[3] != 1 || sums->ne[0] < 1 || sums->ne[1] < 1)
        return sb_fail(SB_ERR_FORMAT, "imatrix %s: %.*s.in_sum2 has shape [%lld, %lld, %lld, %lld]; expected "
                       "[columns, matrices]", path, nb, nm, (long long)sums->ne[0], (long long)sums->ne[1],
                       (long long)sums->ne[2], (long long)sums->ne[3]);
    if (n_elements(counts) != sums->ne[1])
        return sb_fail(SB_ERR_FORMAT, "imatrix %s: %.*s.counts has %lld values for %lld matrices", path, nb, nm,
                       (long long)n_elements(counts), (long long)sums->ne[1]);
    if (act && n_elements(act) != n_elements(sums))
        return sb_fail(SB_ERR_FORMAT, "imatrix %s: mismatched sums and counts for %.*s (in_sum has %lld values, "
                       "in_sum2 %lld)", path, nb, nm, (long long)n_elements(act), (long long)n_elements(sums));
    const int64_t ne0 = sums->ne[0], nmat = sums->ne[1];
    const float *s = (const float *)(const void *)sums->data, *c = (const float *)(const void *)counts->data;
    e->values = (float *)malloc((size_t)(ne0 * nmat) * sizeof(float));
    e->name = (char *)malloc(base + 1);
    if (!e->values || !e->name) return sb_fail(SB_ERR_OOM, "imatrix %s: %lld values of %.*s", path, (long long)(ne0 * nmat), nb, nm);
    memcpy(e->name, nm, base);
    e->name[base] = 0;
    e->n_per_row = ne0;
    e->n_mat = nmat;
    for (int64_t j = 0; j < nmat; j++) {
        float cnt;
        memcpy(&cnt, c + j, sizeof cnt);   /* tensor data is only 32-byte aligned within the file: no alignment assumed */
        if (!isfinite(cnt) || cnt < 0 || cnt != floorf(cnt) || cnt > 2147483647.0f)
            return sb_fail(SB_ERR_FORMAT, "imatrix %s: %.*s.counts[%lld] = %g is not a count (a whole number >= 0)",
                           path, nb, nm, (long long)j, (double)cnt);
        for (int64_t i = 0; i < ne0; i++) {
            float v;
            memcpy(&v, s + j * ne0 + i, sizeof v);
            if (!isfinite(v) || v < 0)
                return sb_fail(SB_ERR_FORMAT, "imatrix %s: %.*s.in_sum2[%lld] = %g (a sum of squares must be finite and >= 0)",
                               path, nb, nm, (long long)(j * ne0 + i), (double)v);
            e->values[j * ne0 + i] = cnt > 0 ? v / cnt : 1.0f;
        }
    }
    return SB_OK;
}

sb_status rt_imatrix_load(const char *path, rt_imatrix *m) {
    memset(m, 0, sizeof *m);
    if (!path) return sb_fail(SB_ERR_INVALID_ARG, "imatrix: NULL path");
    gguf_file f;
    sb_status s = gguf_open(path, &f);
    if (s == SB_ERR_FORMAT_MAGIC)
        return sb_fail(s, "imatrix %s: not a GGUF file (the legacy .dat imatrix format is not supported: convert it with "
                       "llama-imatrix --in-file %s -o OUT.gguf)", path, path);
    if (s != SB_OK) return sb_fail_context(s, "imatrix");  /* gguf_open names the path */
    int64_t n = 0;
    m->path = strdup(path);
    if (!m->path) s = sb_fail(SB_ERR_OOM, "imatrix: path");
    if (s == SB_OK && f.n_tensors == 0) s = sb_fail(SB_ERR_FORMAT, "imatrix %s: no data (no tensors)", path);
    if (s == SB_OK) s = check_metadata(&f, path, m);
    if (s == SB_OK) s = check_names(&f, path, &n);
    if (s == SB_OK && !(m->entries = (rt_imatrix_entry *)calloc((size_t)n, sizeof *m->entries)))
        s = sb_fail(SB_ERR_OOM, "imatrix %s: %lld entries", path, (long long)n);
    for (int64_t i = 0; s == SB_OK && i < f.n_tensors; i++)
        if (has_suffix(f.tensors[i].name, SUM2)) s = load_entry(&f, path, &f.tensors[i], &m->entries[m->n++]);
    gguf_close(&f);
    if (s != SB_OK) rt_imatrix_free(m);
    return s;
}
