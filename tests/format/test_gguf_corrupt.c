/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/format/test_gguf_corrupt.c — the parser against malformed files: each case builds a file
 * that differs from a valid one in one field (robustness.md P3–P11, formats.md §1.5) and asserts the
 * specific status, a non-empty message, and that a valid file still parses afterwards. Each image is
 * copied into an exact-size allocation so ASan sees any read past its end.
 */
#include "format/gguf.h"
#include "base/status.h"
#include "gguf_builder.h"
#include "test.h"

/* Knobs of the base file; a case changes one of them. Defaults give a valid file. */
typedef struct spec {
    char magic[5];
    uint32_t version;
    int64_t n_tensors_delta, n_kv_override;
    int use_n_kv_override;
    const char *key0;          /* "general.architecture" */
    int32_t kv1_type;          /* alignment kv: 4 (u32) */
    uint64_t align;            /* 32 */
    int32_t arr_type, arr_elem;
    uint64_t arr_count;
    int dup_key, bool_byte, bool_arr_byte, str_len_huge, str_arr_huge, key_len_huge;
    const char *t0_name, *t1_name;
    uint32_t t0_dims;
    int64_t t0_ne[5];
    int32_t t0_type, t1_type;
    int64_t t1_ne0;
    uint64_t t0_off, t1_off;
    int t0_name_nul, key0_nul;
    long truncate_at;          /* > 0: cut the file to this many bytes */
    long data_cut;             /* > 0: cut this many bytes off the end */
    long info_cut;             /* > 0: end the file this many bytes before the end of the tensor infos */
} spec;

static spec base(void) {
    spec s = {.magic = "GGUF", .version = 3, .key0 = "general.architecture", .kv1_type = 4, .align = 32,
              .arr_type = 9, .arr_elem = 5, .arr_count = 3, .t0_name = "a", .t1_name = "b", .t0_dims = 2,
              .t0_ne = {32, 2, 1, 1, 1}, .t0_type = 0, .t1_type = 8, .t1_ne0 = 64, .t0_off = 0, .t1_off = 256};
    return s;
}

static gb build(const spec *s) {
    gb b = {0};
    gb_put(&b, s->magic, 4);
    gb_u32(&b, s->version);
    gb_i64(&b, 2 + s->n_tensors_delta);
    gb_i64(&b, s->use_n_kv_override ? s->n_kv_override : 5 + s->dup_key);
    if (s->key_len_huge) {
        gb_u64(&b, UINT64_MAX);
    } else if (s->key0_nul) {
        gb_u64(&b, 7);
        gb_put(&b, "gen\0ral", 7);
        gb_i32(&b, 8);
        gb_str(&b, "llama");
    } else {
        gb_kv_str(&b, s->key0, "llama");
    }
    gb_str(&b, "general.alignment");
    gb_i32(&b, s->kv1_type);
    if (s->kv1_type == 10) gb_u64(&b, s->align); else gb_u32(&b, (uint32_t)s->align);
    gb_str(&b, "test.arr");
    gb_i32(&b, s->arr_type);
    gb_i32(&b, s->arr_elem);
    gb_u64(&b, s->arr_count);
    for (int i = 0; i < 3; i++) gb_i32(&b, i);
    gb_str(&b, "test.flag");
    gb_i32(&b, 7);
    gb_u8(&b, (uint8_t)s->bool_byte);
    gb_str(&b, "test.strs");
    gb_i32(&b, 9);
    gb_i32(&b, s->bool_arr_byte ? 7 : 8);
    if (s->bool_arr_byte) {
        gb_u64(&b, 2);
        gb_u8(&b, 1);
        gb_u8(&b, (uint8_t)s->bool_arr_byte);
    } else {
        gb_u64(&b, s->str_arr_huge ? (1ull << 61) : 2);
        gb_str(&b, "x");
        if (s->str_len_huge) gb_u64(&b, 1ull << 40); else gb_str(&b, "yz");
    }
    if (s->dup_key) gb_kv_u32(&b, "test.flag", 1);
    if (s->t0_name_nul) {
        gb_u64(&b, 3);
        gb_put(&b, "a\0c", 3);
        gb_u32(&b, s->t0_dims);
        for (uint32_t d = 0; d < s->t0_dims && d < 5; d++) gb_i64(&b, s->t0_ne[d]);
        gb_i32(&b, s->t0_type);
        gb_u64(&b, s->t0_off);
    } else {
        gb_str(&b, s->t0_name);
        gb_u32(&b, s->t0_dims);
        for (uint32_t d = 0; d < s->t0_dims && d < 5; d++) gb_i64(&b, s->t0_ne[d]);
        gb_i32(&b, s->t0_type);
        gb_u64(&b, s->t0_off);
    }
    int64_t ne1[1] = {s->t1_ne0};
    gb_tensor(&b, s->t1_name, 1, ne1, s->t1_type, s->t1_off);
    if (s->info_cut > 0) {
        b.len -= (size_t)s->info_cut;
        return b;
    }
    gb_pad(&b, 32);
    gb_zeros(&b, 512);
    if (s->truncate_at > 0 && (size_t)s->truncate_at < b.len) b.len = (size_t)s->truncate_at;
    if (s->data_cut > 0) b.len -= (size_t)s->data_cut;
    return b;
}

static sb_status parse_exact(const uint8_t *p, size_t n) {
    uint8_t *copy = (uint8_t *)malloc(n ? n : 1);
    memcpy(copy, p, n);
    gguf_file f;
    sb_error_clear();
    sb_status s = gguf_parse(copy, n, &f);
    if (s == SB_OK) gguf_close(&f);
    free(copy);
    return s;
}

static int n_kinds;

static void expect(const char *what, spec s, sb_status want) {
    gb b = build(&s);
    sb_status got = parse_exact(b.p, b.len);
    n_kinds++;
    CHECKF(got == want, "%s: got %s (%s), want %s", what, sb_status_str(got), sb_last_error(), sb_status_str(want));
    if (want != SB_OK) {
        CHECKF(strlen(sb_last_error()) > 10, "%s: message '%s'", what, sb_last_error());
        CHECKF(sb_status_family(got) == SB_ERR_FORMAT, "%s: family", what);
    }
    free(b.p);
}

int main(void) {
    spec s;
    expect("valid base file", base(), SB_OK);
    s = base(); memcpy(s.magic, "GGUG", 4); expect("bad magic", s, SB_ERR_FORMAT_MAGIC);
    s = base(); s.version = 0; expect("version 0", s, SB_ERR_FORMAT_VERSION);
    s = base(); s.version = 1; expect("version 1", s, SB_ERR_FORMAT_VERSION);
    s = base(); s.version = 4; expect("version 4", s, SB_ERR_FORMAT_VERSION);
    s = base(); s.version = 2; expect("version 2 accepted", s, SB_OK);
    s = base(); s.version = 0x03000000; expect("byte-swapped version", s, SB_ERR_FORMAT_ENDIAN);
    s = base(); s.use_n_kv_override = 1; s.n_kv_override = -1; expect("n_kv negative", s, SB_ERR_FORMAT_COUNT);
    s = base(); s.use_n_kv_override = 1; s.n_kv_override = INT64_MAX; expect("n_kv huge", s, SB_ERR_FORMAT_COUNT);
    s = base(); s.use_n_kv_override = 1; s.n_kv_override = (int64_t)1 << 32; expect("n_kv 2^32", s, SB_ERR_FORMAT_COUNT);
    s = base(); s.n_tensors_delta = -3; expect("n_tensors negative", s, SB_ERR_FORMAT_COUNT);
    s = base(); s.n_tensors_delta = (int64_t)1 << 40; expect("n_tensors huge", s, SB_ERR_FORMAT_COUNT);
    s = base(); s.key_len_huge = 1; expect("key length 2^64-1", s, SB_ERR_FORMAT_STRING_LEN);
    s = base(); s.key0 = ""; expect("empty key", s, SB_ERR_FORMAT_KEY_EMPTY);
    s = base(); s.key0_nul = 1; expect("key with NUL byte", s, SB_ERR_FORMAT_KEY_NUL);
    s = base(); s.dup_key = 1; expect("duplicate key", s, SB_ERR_FORMAT_KEY_DUPLICATE);
    s = base(); s.arr_type = 13; expect("value type 13", s, SB_ERR_FORMAT_VALUE_TYPE);
    s = base(); s.arr_type = -1; expect("value type -1", s, SB_ERR_FORMAT_VALUE_TYPE);
    s = base(); s.arr_elem = 9; expect("array of arrays", s, SB_ERR_FORMAT_NESTED_ARRAY);
    s = base(); s.arr_elem = 99; expect("array element type 99", s, SB_ERR_FORMAT_VALUE_TYPE);
    s = base(); s.arr_count = 1000000; expect("array count beyond file", s, SB_ERR_FORMAT_ARRAY_LEN);
    s = base(); s.arr_count = 1ull << 62; expect("array count × size overflows", s, SB_ERR_FORMAT_ARRAY_LEN);
    s = base(); s.str_arr_huge = 1; expect("string array count 2^61", s, SB_ERR_FORMAT_ARRAY_LEN);
    s = base(); s.str_len_huge = 1; expect("string length 2^40", s, SB_ERR_FORMAT_STRING_LEN);
    s = base(); s.bool_byte = 2; expect("bool byte 2", s, SB_ERR_FORMAT_BOOL);
    s = base(); s.bool_arr_byte = 0xff; expect("bool array byte 0xff", s, SB_ERR_FORMAT_BOOL);
    s = base(); s.align = 0; expect("alignment 0", s, SB_ERR_FORMAT_ALIGNMENT);
    s = base(); s.align = 13; expect("alignment 13", s, SB_ERR_FORMAT_ALIGNMENT);
    s = base(); s.align = 1u << 21; expect("alignment 2 MiB", s, SB_ERR_FORMAT_ALIGNMENT);
    s = base(); s.align = 1u << 31; expect("alignment 2^31", s, SB_ERR_FORMAT_ALIGNMENT);
    s = base(); s.kv1_type = 10; expect("alignment as u64", s, SB_ERR_FORMAT_KEY_TYPE);
    s = base(); s.t0_name = "0123456789012345678901234567890123456789012345678901234567890123";
    expect("tensor name of 64 bytes", s, SB_ERR_FORMAT_TENSOR_NAME);
    s = base(); s.t0_name = ""; expect("empty tensor name", s, SB_ERR_FORMAT_TENSOR_NAME);
    s = base(); s.t0_name_nul = 1; expect("tensor name with NUL", s, SB_ERR_FORMAT_TENSOR_NAME);
    s = base(); s.t1_name = "a"; expect("duplicate tensor name", s, SB_ERR_FORMAT_TENSOR_DUPLICATE);
    s = base(); s.t0_dims = 5; expect("n_dims 5", s, SB_ERR_FORMAT_TENSOR_DIMS);
    s = base(); s.t0_dims = UINT32_MAX; expect("n_dims 2^32-1", s, SB_ERR_FORMAT_TENSOR_DIMS);
    s = base(); s.t0_ne[1] = -2; expect("negative ne", s, SB_ERR_FORMAT_TENSOR_SHAPE);
    s = base(); s.t0_ne[0] = INT64_MAX; s.t0_ne[1] = 2; expect("ne (INT64_MAX, 2)", s, SB_ERR_FORMAT_TENSOR_OVERFLOW);
    s = base(); s.t0_ne[0] = (int64_t)1 << 32; s.t0_ne[1] = (int64_t)1 << 32; expect("ne product 2^64", s, SB_ERR_FORMAT_TENSOR_OVERFLOW);
    s = base(); s.t0_ne[0] = (int64_t)1 << 62; s.t0_ne[1] = 1; expect("byte size 2^64", s, SB_ERR_FORMAT_TENSOR_OVERFLOW);
    s = base(); s.t0_type = 4; expect("removed type 4 (Q4_2)", s, SB_ERR_FORMAT_TENSOR_REMOVED_TYPE);
    s = base(); s.t0_type = 32; expect("removed type 32 (Q4_0_4_8)", s, SB_ERR_FORMAT_TENSOR_REMOVED_TYPE);
    s = base(); s.t0_type = 43; expect("type 43", s, SB_ERR_FORMAT_TENSOR_TYPE);
    s = base(); s.t0_type = -1; expect("type -1", s, SB_ERR_FORMAT_TENSOR_TYPE);
    s = base(); s.t0_type = INT32_MAX; expect("type 2^31-1", s, SB_ERR_FORMAT_TENSOR_TYPE);
    s = base(); s.t1_ne0 = 33; expect("ne0 not a multiple of the block", s, SB_ERR_FORMAT_TENSOR_BLOCK);
    s = base(); s.t1_off = 264; expect("misaligned offset", s, SB_ERR_FORMAT_TENSOR_ALIGN);
    s = base(); s.t1_off = 128; expect("overlapping tensors", s, SB_ERR_FORMAT_TENSOR_OVERLAP);
    s = base(); s.t1_off = 1u << 20; expect("offset past EOF", s, SB_ERR_FORMAT_TENSOR_BOUNDS);
    s = base(); s.t1_off = UINT64_MAX - 31; expect("offset + size wraps", s, SB_ERR_FORMAT_TENSOR_OVERFLOW);
    s = base(); s.data_cut = 250; expect("data cut short", s, SB_ERR_FORMAT_TENSOR_BOUNDS);
    s = base(); s.info_cut = 4; expect("cut inside the last tensor offset", s, SB_ERR_FORMAT_TRUNCATED);
    s = base(); s.info_cut = 20; expect("cut inside the last tensor's dims", s, SB_ERR_FORMAT_TRUNCATED);
    s = base(); s.truncate_at = 2; expect("cut inside the magic", s, SB_ERR_FORMAT_TRUNCATED);
    s = base(); s.t1_off = 320; expect("gap between tensors accepted", s, SB_OK);
    s = base(); s.t1_off = 480; expect("last tensor past the end", s, SB_ERR_FORMAT_TENSOR_BOUNDS);
    s = base(); s.t0_off = 256; s.t1_off = 0; s.t0_ne[1] = 1; expect("out-of-order offsets accepted", s, SB_OK);
    s = base(); s.t0_ne[1] = 0; expect("zero-sized tensor accepted", s, SB_OK);

    /* empty but valid files */
    gb b = {0};
    gb_header(&b, 3, 0, 0);
    CHECK(parse_exact(b.p, b.len) == SB_OK);
    b.len = 0;
    CHECK(parse_exact(b.p, 0) == SB_ERR_FORMAT_TRUNCATED);
    /* a 200-byte file that declares a 1 GiB string must fail before allocating it */
    b.len = 0;
    gb_header(&b, 3, 0, 1);
    gb_str(&b, "k");
    gb_i32(&b, 8);
    gb_u64(&b, 1ull << 30);
    gb_zeros(&b, 200 - b.len);
    CHECK(parse_exact(b.p, b.len) == SB_ERR_FORMAT_STRING_LEN);
    /* 10^6 tensors declared in a tiny file */
    b.len = 0;
    gb_header(&b, 3, 1000000, 0);
    gb_zeros(&b, 100);
    CHECK(parse_exact(b.p, b.len) == SB_ERR_FORMAT_COUNT);
    free(b.p);

    /* the message names the field, the offset and the values */
    s = base(); s.t1_off = 1u << 20;
    b = build(&s);
    parse_exact(b.p, b.len);
    CHECKF(strstr(sb_last_error(), "tensor \"b\": data [0x") && strstr(sb_last_error(), "exceeds file size 0x"), "%s", sb_last_error());
    free(b.p);

    printf("%d corruption/acceptance kinds checked\n", n_kinds);
    CHECK(n_kinds >= 30);
    return test_summary();
}
