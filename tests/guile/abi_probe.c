/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/guile/abi_probe.c — what the C compiler and the C API say, for the Guile binding's tests
 * to compare against (the binding has no C glue, so its struct layouts and results are checked
 * from outside). Uses only include/sonicboom.h.
 *   abi_probe layout                   one line per struct "NAME SIZE" and per field
 *                                      "NAME.FIELD OFFSET SIZE", for every struct the binding
 *                                      marshals (bindings/guile/sonicboom.scm %struct-layouts)
 *   abi_probe chat MODEL ROLE TEXT ... sb_chat_render of the messages (with the generation
 *                                      prompt) written to stdout as is
 * Exit 0 on success; 1 with "error: STATUS: detail" on stderr when the library fails; 2 on usage.
 */
#include <sonicboom.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STRUCT(T) printf(#T " %zu\n", sizeof(T))
#define FIELD(T, F) printf(#T "." #F " %zu %zu\n", offsetof(T, F), sizeof(((T *)0)->F))

static void print_layouts(void) {
    STRUCT(sb_backend_info);
    FIELD(sb_backend_info, cuda_compiled); FIELD(sb_backend_info, cuda_devices);
    FIELD(sb_backend_info, cuda_device_name); FIELD(sb_backend_info, cuda_cc);
    FIELD(sb_backend_info, cuda_error); FIELD(sb_backend_info, cpu_isa);

    STRUCT(sb_model_params);
    FIELD(sb_model_params, check_tensors); FIELD(sb_model_params, progress);
    FIELD(sb_model_params, progress_user); FIELD(sb_model_params, no_mmap);
    FIELD(sb_model_params, reserved);

    STRUCT(sb_model_info);
    FIELD(sb_model_info, arch); FIELD(sb_model_info, name); FIELD(sb_model_info, n_vocab);
    FIELD(sb_model_info, n_embd); FIELD(sb_model_info, n_layer); FIELD(sb_model_info, n_head);
    FIELD(sb_model_info, n_head_kv); FIELD(sb_model_info, head_dim); FIELD(sb_model_info, n_ff);
    FIELD(sb_model_info, n_ctx_train); FIELD(sb_model_info, n_params); FIELD(sb_model_info, weight_bytes);

    STRUCT(sb_session_params);
    FIELD(sb_session_params, n_ctx); FIELD(sb_session_params, kv_type); FIELD(sb_session_params, n_threads);
    FIELD(sb_session_params, n_batch); FIELD(sb_session_params, device);
    FIELD(sb_session_params, allow_ctx_extend); FIELD(sb_session_params, cuda_graphs); FIELD(sb_session_params, codegen);
    FIELD(sb_session_params, act_type); FIELD(sb_session_params, swa_full); FIELD(sb_session_params, reserved);

    STRUCT(sb_session_stats);
    FIELD(sb_session_stats, n_prefill_tokens); FIELD(sb_session_stats, n_decode_tokens);
    FIELD(sb_session_stats, n_reused_tokens); FIELD(sb_session_stats, prefill_seconds);
    FIELD(sb_session_stats, decode_seconds); FIELD(sb_session_stats, prefill_tok_s);
    FIELD(sb_session_stats, decode_tok_s); FIELD(sb_session_stats, decode_gb_s);
    FIELD(sb_session_stats, n_plans_built);

    STRUCT(sb_sampler_params);
    FIELD(sb_sampler_params, temp); FIELD(sb_sampler_params, top_k); FIELD(sb_sampler_params, top_p);
    FIELD(sb_sampler_params, min_p); FIELD(sb_sampler_params, repeat_penalty);
    FIELD(sb_sampler_params, presence_penalty); FIELD(sb_sampler_params, frequency_penalty);
    FIELD(sb_sampler_params, penalty_last_n); FIELD(sb_sampler_params, seed); FIELD(sb_sampler_params, reserved);

    STRUCT(sb_generate_params);
    FIELD(sb_generate_params, n_predict); FIELD(sb_generate_params, stop); FIELD(sb_generate_params, n_stop);
    FIELD(sb_generate_params, add_special); FIELD(sb_generate_params, parse_special);
    FIELD(sb_generate_params, ignore_eos); FIELD(sb_generate_params, reserved);

    STRUCT(sb_generate_result);
    FIELD(sb_generate_result, n_prompt); FIELD(sb_generate_result, n_reused);
    FIELD(sb_generate_result, n_generated); FIELD(sb_generate_result, prefill_seconds);
    FIELD(sb_generate_result, decode_seconds); FIELD(sb_generate_result, stop);

    STRUCT(sb_chat_message);
    FIELD(sb_chat_message, role); FIELD(sb_chat_message, content);
}

static int fail(sb_status st) {
    fprintf(stderr, "error: %s: %s\n", sb_status_str(st), sb_last_error());
    return 1;
}

/* argv: MODEL ROLE TEXT [ROLE TEXT ...] */
static int print_chat(int argc, char **argv) {
    size_t n = (size_t)(argc - 1) / 2;
    sb_chat_message *msgs = calloc(n, sizeof *msgs);
    if (!msgs) return fail(SB_ERR_OOM);
    for (size_t i = 0; i < n; i++) msgs[i] = (sb_chat_message){argv[1 + 2 * i], argv[2 + 2 * i]};
    sb_vocab *v = NULL;
    char *buf = NULL;
    size_t len = 0;
    sb_status st = sb_vocab_load(argv[0], &v);
    if (st == SB_OK) st = sb_chat_render(v, msgs, n, 1, NULL, 0, &len);
    if (st == SB_ERR_BUFFER_TOO_SMALL) {
        buf = malloc(len + 1);
        st = buf ? sb_chat_render(v, msgs, n, 1, buf, len + 1, &len) : SB_ERR_OOM;
    }
    int rc = st == SB_OK ? (fwrite(buf, 1, len, stdout) == len ? 0 : 1) : fail(st);
    free(buf);
    free(msgs);
    sb_vocab_free(v);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "layout")) {
        print_layouts();
        return 0;
    }
    if (argc >= 5 && argc % 2 == 1 && !strcmp(argv[1], "chat")) return print_chat(argc - 2, argv + 2);
    fprintf(stderr, "usage: abi_probe layout | abi_probe chat MODEL ROLE TEXT [ROLE TEXT ...]\n");
    return 2;
}
