/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * examples/generate.c — the smallest complete program over the public header: load a GGUF model,
 * open a session, stream a continuation of a prompt to stdout.
 *
 *   generate MODEL.gguf "PROMPT" [N_TOKENS]
 *
 * Build against an installed SonicBoom:  cc generate.c $(pkg-config --cflags --libs sonicboom)
 * or with CMake: find_package(SonicBoom REQUIRED) + target_link_libraries(app SonicBoom::sonicboom).
 * Greedy sampling (temperature 0), so the output is the same on every run.
 */
#include <sonicboom.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* called with each new piece of text; returning non-zero would stop the generation */
static int print_piece(void *user, const char *text, size_t len, int32_t token) {
    (void)user, (void)token;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;
}

static int fail(const char *what, sb_status s) {
    fprintf(stderr, "generate: %s: %s: %s\n", what, sb_status_str(s), sb_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: generate MODEL.gguf PROMPT [N_TOKENS]\n");
        return 2;
    }
    if (sb_version_number() / 1000 != SB_VERSION_NUMBER / 1000) {
        fprintf(stderr, "generate: built for SonicBoom %s, running with %s\n", SB_VERSION_STRING, sb_version_string());
        return 1;
    }
    const long n_predict = argc == 4 ? strtol(argv[3], NULL, 10) : 32;

    sb_model *model = NULL;
    sb_status s = sb_model_load(argv[1], NULL, &model);
    if (s != SB_OK) return fail("loading the model", s);

    sb_session_params sp;
    sb_session_default_params(&sp);
    sb_session *session = NULL;
    s = sb_session_create(model, &sp, &session);
    if (s != SB_OK) {
        sb_model_free(model);
        return fail("creating a session", s);
    }

    sb_model_info info;
    sb_model_get_info(model, &info);
    sb_sampler_params smp_p;
    sb_sampler_default_params(&smp_p);
    smp_p.temp = 0.0f; /* greedy */
    sb_sampler *sampler = NULL;
    s = sb_sampler_create(&smp_p, info.n_vocab, &sampler);

    sb_generate_params gp;
    sb_generate_default_params(&gp);
    gp.n_predict = n_predict;
    sb_generate_result res;
    if (s == SB_OK) {
        fputs(argv[2], stdout);
        s = sb_generate(session, sampler, argv[2], strlen(argv[2]), &gp, print_piece, NULL, &res);
        putchar('\n');
    }
    int rc = 0;
    if (s != SB_OK)
        rc = fail("generating", s);
    else
        fprintf(stderr, "generate: %lld prompt tokens, %lld generated\n", (long long)res.n_prompt, (long long)res.n_generated);
    sb_sampler_free(sampler);
    sb_session_free(session);
    sb_model_free(model);
    return rc;
}
