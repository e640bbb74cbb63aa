/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/format/test_gguf_roundtrip.c — writer → reader round trip (robustness.md P15): for 200 seeds,
 * random metadata of every value type (scalars and arrays, strings with any bytes) and random
 * tensors of every live type with random shapes, serialised and parsed back from memory; one file
 * also through the atomic file path (no temp file left behind). Everything must compare equal.
 * Plus the writer's llama.cpp semantics: re-setting a key moves it to the end.
 */
#include "format/gguf.h"
#include "format/gguf_write.h"
#include "quant/types.h"
#include "base/status.h"
#include "test.h"

#include <unistd.h>

#define MAX_KV 40
#define MAX_T 12

typedef struct expect_kv {
    char key[32];
    uint32_t type, elem;
    uint64_t count;
    uint8_t raw[256];  /* numeric values */
    char strs[8][24];
    size_t str_len[8];
} expect_kv;

static uint64_t seed;

static int check_file(const gguf_file *f, const expect_kv *kvs, int n_kv, char names[][GGUF_MAX_NAME], const int *types,
                      int64_t ne[][4], uint8_t **data, int n_t) {
    int before = test_failed_;
    CHECK_EQ_INT(f->n_kv, n_kv);
    CHECK_EQ_INT(f->n_tensors, n_t);
    for (int i = 0; i < n_kv && i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kvs[i];
        const expect_kv *e = &kvs[i];
        CHECKF(!strcmp(kv->key, e->key), "key %d: %s vs %s", i, kv->key, e->key);
        CHECK_EQ_INT(kv->type, e->type);
        CHECK_EQ_INT(kv->elem_type, e->elem);
        CHECK_EQ_INT(kv->count, e->count);
        if (e->elem == SB_GGUF_STRING) {
            for (uint64_t j = 0; j < e->count; j++) {
                sb_strview v;
                CHECK(gguf_kv_str(kv, j, &v) == SB_OK && v.len == e->str_len[j] && !memcmp(v.ptr, e->strs[j], v.len));
            }
        } else {
            CHECK(!memcmp(kv->data, e->raw, e->count * gguf_type_size(e->elem)));
        }
    }
    for (int i = 0; i < n_t && i < f->n_tensors; i++) {
        const gguf_tensor *t = gguf_find_tensor(f, names[i]);
        CHECKF(t != NULL, "tensor %s", names[i]);
        if (!t) continue;
        CHECK_EQ_INT(t->type, types[i]);
        for (int d = 0; d < 4; d++) CHECK_EQ_INT(t->ne[d], ne[i][d]);
        CHECK(t->offset % f->alignment == 0);
        CHECK(t->nbytes == 0 || !memcmp(t->data, data[i], t->nbytes));
    }
    return test_failed_ == before;
}

static void one_seed(int round) {
    gguf_writer *w;
    CHECK(gguf_writer_create(&w) == SB_OK);
    expect_kv kvs[MAX_KV];
    int n_kv = 0;
    static const uint32_t scalar_types[] = {0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12};
    uint32_t align = 32;
    if (round % 3 == 1) {
        align = 1u << (test_rand_u64(&seed) % 12 + 1);
        CHECK(gguf_writer_set_u32(w, "general.alignment", align) == SB_OK);
        kvs[n_kv] = (expect_kv){.type = 4, .elem = 4, .count = 1};
        strcpy(kvs[n_kv].key, "general.alignment");
        memcpy(kvs[n_kv].raw, &align, 4);
        n_kv++;
    }
    int want = 5 + (int)(test_rand_u64(&seed) % 20);
    while (n_kv < want) {
        expect_kv *e = &kvs[n_kv];
        memset(e, 0, sizeof *e);
        snprintf(e->key, sizeof e->key, "k%d.%llu", n_kv, (unsigned long long)(test_rand_u64(&seed) % 1000));
        int is_arr = test_rand_u64(&seed) % 2, is_str = test_rand_u64(&seed) % 4 == 0;
        uint32_t t = is_str ? SB_GGUF_STRING : scalar_types[test_rand_u64(&seed) % 11];
        e->elem = t;
        e->type = is_arr ? SB_GGUF_ARRAY : t;
        e->count = is_arr ? test_rand_u64(&seed) % 9 : 1;
        if (t == SB_GGUF_STRING) {
            sb_strview v[8];
            for (uint64_t j = 0; j < e->count; j++) {
                e->str_len[j] = test_rand_u64(&seed) % 20;
                for (size_t k = 0; k < e->str_len[j]; k++) e->strs[j][k] = (char)(test_rand_u64(&seed) & 0xff);
                v[j] = (sb_strview){e->strs[j], e->str_len[j]};
            }
            if (is_arr) CHECK(gguf_writer_set_str_array(w, e->key, v, e->count) == SB_OK);
            else CHECK(gguf_writer_set_str(w, e->key, v[0].ptr, v[0].len) == SB_OK);
        } else {
            size_t es = gguf_type_size(t);
            for (size_t k = 0; k < e->count * es; k++) e->raw[k] = (uint8_t)(test_rand_u64(&seed) & 0xff);
            if (t == SB_GGUF_BOOL)
                for (size_t k = 0; k < e->count; k++) e->raw[k] &= 1;
            CHECK(gguf_writer_set_raw(w, e->key, e->type, t, e->count, e->raw) == SB_OK);
        }
        n_kv++;
    }
    char names[MAX_T][GGUF_MAX_NAME];
    int types[MAX_T];
    int64_t ne[MAX_T][4];
    uint8_t *data[MAX_T];
    int n_t = (int)(test_rand_u64(&seed) % MAX_T);
    for (int i = 0; i < n_t; i++) {
        int type;
        do type = (int)(test_rand_u64(&seed) % SB_TYPE_COUNT);
        while (!qk_valid(type));
        const qk_traits *tr = qk_get(type);
        types[i] = type;
        snprintf(names[i], GGUF_MAX_NAME, "blk.%d.w%llu", i, (unsigned long long)(test_rand_u64(&seed) % 100));
        int nd = 1 + (int)(test_rand_u64(&seed) % 4);
        for (int d = 0; d < 4; d++) ne[i][d] = d < nd ? 1 + (int64_t)(test_rand_u64(&seed) % 3) : 1;
        ne[i][0] *= tr->blck;
        if (nd >= 2 && test_rand_u64(&seed) % 10 == 0) ne[i][1] = 0; /* zero-sized tensors are legal */
        uint64_t nb = (uint64_t)(ne[i][0] / tr->blck * tr->type_size * ne[i][1] * ne[i][2] * ne[i][3]);
        data[i] = (uint8_t *)malloc(nb ? nb : 1);
        for (uint64_t k = 0; k < nb; k++) data[i][k] = (uint8_t)test_rand_u64(&seed);
        CHECK(gguf_writer_add_tensor(w, names[i], type, nd, ne[i], data[i]) == SB_OK);
    }
    uint8_t *img;
    size_t size;
    CHECK(gguf_writer_to_memory(w, &img, &size) == SB_OK);
    gguf_file f;
    sb_status s = gguf_parse(img, size, &f);
    CHECKF(s == SB_OK, "round %d: %s", round, sb_last_error());
    if (s == SB_OK) {
        CHECKF(check_file(&f, kvs, n_kv, names, types, ne, data, n_t), "round %d seed state %llu", round, (unsigned long long)seed);
        CHECK_EQ_INT(f.alignment, align);
        gguf_close(&f);
    }
    if (round == 0) { /* the file path: atomic write, mmap read */
        char path[256];
        snprintf(path, sizeof path, "/tmp/sb_roundtrip_%d.gguf", (int)getpid());
        CHECK(gguf_writer_write(w, path) == SB_OK);
        char tmp[300];
        snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
        CHECK(access(tmp, F_OK) != 0);
        CHECK(gguf_open(path, &f) == SB_OK);
        CHECK(check_file(&f, kvs, n_kv, names, types, ne, data, n_t));
        gguf_close(&f);
        unlink(path);
        CHECK(gguf_writer_write(w, "/nonexistent-dir/x.gguf") == SB_ERR_IO);
    }
    free(img);
    for (int i = 0; i < n_t; i++) free(data[i]);
    gguf_writer_free(w);
}

int main(void) {
    seed = 0xC0FFEEull;
    printf("seed %llu\n", (unsigned long long)seed);
    for (int r = 0; r < 200; r++) one_seed(r);

    /* re-setting a key moves it to the end, like gguf_set_val_* */
    gguf_writer *w;
    gguf_writer_create(&w);
    gguf_writer_set_u32(w, "a", 1);
    gguf_writer_set_u32(w, "b", 2);
    gguf_writer_set_u32(w, "a", 3);
    uint8_t *img;
    size_t size;
    gguf_file f;
    CHECK(gguf_writer_to_memory(w, &img, &size) == SB_OK);
    CHECK(gguf_parse(img, size, &f) == SB_OK);
    CHECK(f.n_kv == 2 && !strcmp(f.kvs[0].key, "b") && !strcmp(f.kvs[1].key, "a"));
    uint32_t v = 0;
    CHECK(gguf_get_u32(&f, "a", &v) == SB_OK && v == 3);
    CHECK(gguf_get_u32(&f, "zz", &v) == SB_ERR_NOT_FOUND);
    sb_strview sv;
    CHECK(gguf_get_str(&f, "a", &sv) == SB_ERR_FORMAT_KEY_TYPE);
    gguf_close(&f);
    free(img);
    /* invalid writer input is refused, not written */
    int64_t ne[4] = {33, 1, 1, 1};
    CHECK(gguf_writer_add_tensor(w, "q", SB_TYPE_Q8_0, 1, ne, "") == SB_ERR_INVALID_ARG);
    CHECK(gguf_writer_add_tensor(w, "", SB_TYPE_F32, 1, ne, "") == SB_ERR_INVALID_ARG);
    CHECK(gguf_writer_add_tensor(w, "r", 4, 1, ne, "") == SB_ERR_INVALID_ARG);
    gguf_writer_free(w);
    return test_summary();
}
