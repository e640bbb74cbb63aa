/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_embedded.c — the embedded default model against its training framework's own
 * forward pass (PyTorch, float64, at export time: tests/data/embedded-oracle.ref). An oracle we did
 * not write checks our llama math: Q8_0 (shipped) NMSE <= 1e-3, F32 (kept out of git; checked when
 * models/ holds it) NMSE <= 1e-6. Evaluated like the reference files: the prompt as one batch
 * with every position's logits, then each decode token alone.
 */
#include "runtime/session.h"
#include "ref_file.h"
#include "test.h"

#include <unistd.h>

static void check(const char *model, const ref_file *r, double limit) {
    rt_model *m;
    sb_status s = rt_model_load(model, NULL, &m);
    CHECKF(s == SB_OK, "%s: %s", model, sb_last_error());
    if (s != SB_OK) return;
    const int64_t V = r->n_vocab, n = (int64_t)r->n_prompt + r->n_decode;
    CHECK_EQ_INT(m->hp.n_vocab, V);
    float *ours = (float *)malloc((size_t)(n * V) * sizeof *ours);
    rt_session *ss;
    rt_session_params sp = {.n_ctx = n, .n_threads = 2};
    CHECK(rt_session_create(m, &sp, &ss) == SB_OK);
    CHECK(rt_session_eval(ss, r->tokens, r->n_prompt, true, ours) == SB_OK);
    for (uint32_t i = 0; i < r->n_decode; i++) {
        CHECK(rt_session_eval(ss, &r->tokens[r->n_prompt + i], 1, false, NULL) == SB_OK);
        memcpy(ours + (r->n_prompt + i) * V, rt_session_logits(ss), (size_t)V * sizeof *ours);
    }
    ref_cmp c = ref_compare(ours, r->logits, n, V);
    printf("%s: NMSE %.3e vs the PyTorch oracle (limit %.0e), argmax %d/%d where the margin > 0.05\n", model, c.nmse, limit,
           c.argmax_checked - c.argmax_bad, c.argmax_checked);
    CHECKF(c.nmse <= limit, "%s: NMSE %.3e", model, c.nmse);
    CHECK(c.argmax_bad == 0);
    rt_session_free(ss);
    free(ours);
    rt_model_free(m);
}

int main(void) {
    size_t size;
    unsigned char *blob = test_read_file("tests/data/embedded-oracle.ref", &size);
    CHECKF(blob != NULL, "tests/data/embedded-oracle.ref missing");
    if (!blob) return test_summary();
    ref_file r = {0};
    CHECK(ref_load(blob, size, &r) == 0);
    free(blob);
    check("models/sonicboom-kjv-13m-q8_0.gguf", &r, 1e-3);
    if (access("models/sonicboom-kjv-13m-f32.gguf", R_OK) == 0) check("models/sonicboom-kjv-13m-f32.gguf", &r, 1e-6);
    else printf("F32 master not present (kept out of git; see models/README.md): F32 check skipped\n");
    ref_free(&r);
    return test_summary();
}
