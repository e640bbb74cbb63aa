/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * fuzz/fuzz_gguf.c — libFuzzer target for the pure GGUF parser (robustness.md P1): parse the bytes,
 * and on success walk every key, element and tensor through the typed accessors and read the first
 * and last byte of every tensor's data, so a wrong bound anywhere becomes an ASan report.
 */
#include "format/gguf.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file f;
    if (gguf_parse(data, size, &f) != SB_OK) return 0;
    volatile uint64_t sink = 0;
    for (int64_t i = 0; i < f.n_kv; i++) {
        const gguf_kv *kv = &f.kvs[i];
        sink += strlen(kv->key);
        if (gguf_find(&f, kv->key) == NULL) abort(); /* every key must be found again */
        for (uint64_t j = 0; j < kv->count && j < 64; j++) {
            int64_t iv;
            uint64_t uv;
            double dv;
            sb_strview sv;
            if (gguf_kv_i64(kv, j, &iv) == SB_OK) sink += (uint64_t)iv;
            if (gguf_kv_u64(kv, j, &uv) == SB_OK) sink += uv;
            if (gguf_kv_f64(kv, j, &dv) == SB_OK) sink += (uint64_t)(dv == dv);
            if (gguf_kv_str(kv, j, &sv) == SB_OK && sv.len) sink += (uint8_t)sv.ptr[0] + (uint8_t)sv.ptr[sv.len - 1];
        }
    }
    for (int64_t i = 0; i < f.n_tensors; i++) {
        const gguf_tensor *t = &f.tensors[i];
        if (gguf_find_tensor(&f, t->name) != t) abort();
        if (t->nbytes) sink += t->data[0] + t->data[t->nbytes - 1];
    }
    (void)sink;
    gguf_close(&f);
    return 0;
}
