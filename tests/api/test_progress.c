/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/api/test_progress.c — the progress callbacks of the long operations, through the public
 * ABI: sb_model_load (sb_model_params.progress), sb_quantize_file and sb_synth_model. Each reports
 * a non-decreasing fraction done / total with a constant total, ends with exactly one call at
 * done == total (fraction 1), and a callback returning nonzero stops the operation with
 * SB_ERR_CANCELLED: no model handle, and for the file writers no output file and no temporary file
 * left in the directory. Zeroed params (no callback) still load.
 */
#include "test.h"

#include "sonicboom.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct record {
    int calls, cancel_at, at_end;
    uint64_t last_done, total;
    bool monotone, same_total;
} record;

static int on_progress(void *user, uint64_t done, uint64_t total, const char *what) {
    (void)what;
    record *r = (record *)user;
    if (r->calls == 0) r->total = total;
    r->monotone &= done >= r->last_done && done <= total;
    r->same_total &= total == r->total;
    r->at_end += done == total;
    r->last_done = done;
    r->calls++;
    return r->cancel_at && r->calls >= r->cancel_at;
}

static void expect_complete(const record *r, const char *what) {
    CHECKF(r->calls >= 2, "%s: %d progress calls", what, r->calls);
    CHECKF(r->monotone && r->same_total, "%s: fractions not increasing or total changed", what);
    CHECKF(r->total > 0 && r->last_done == r->total && r->at_end == 1, "%s: last %llu of %llu, %d calls at the end", what,
           (unsigned long long)r->last_done, (unsigned long long)r->total, r->at_end);
}

/* Nothing in dir but the files named in keep (NULL-terminated). */
static bool dir_holds_only(const char *dir, const char *const *keep) {
    DIR *d = opendir(dir);
    if (!d) return false;
    bool only = true;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        bool kept = false;
        for (const char *const *k = keep; *k; k++) kept |= !strcmp(e->d_name, *k);
        if (!kept) {
            printf("unexpected file: %s/%s\n", dir, e->d_name);
            only = false;
        }
    }
    closedir(d);
    return only;
}

static void test_load(void) {
    const char *path = "models/sonicboom-kjv-13m-q8_0.gguf";
    sb_model_params mp;
    sb_model_default_params(&mp);
    CHECK(mp.progress == NULL && mp.progress_user == NULL);
    record r = {.monotone = true, .same_total = true};
    mp.progress = on_progress;
    mp.progress_user = &r;
    sb_model *m = NULL;
    sb_status st = sb_model_load(path, &mp, &m);
    CHECKF(st == SB_OK && m, "load: %s %s", sb_status_str(st), sb_last_error());
    expect_complete(&r, "sb_model_load");
    CHECKF(r.total >= 10000000, "load: total %llu bytes for a 13 MB model", (unsigned long long)r.total);
    sb_model_free(m);
    m = NULL;
    record c = {.monotone = true, .same_total = true, .cancel_at = 3};
    mp.progress_user = &c;
    st = sb_model_load(path, &mp, &m);
    CHECKF(st == SB_ERR_CANCELLED && m == NULL && c.calls == 3, "cancelled load: %s, %d calls", sb_status_str(st), c.calls);
    CHECK(strstr(sb_last_error(), "cancelled") != NULL);
    sb_model_default_params(&mp);
    CHECK(sb_model_load(path, &mp, &m) == SB_OK);
    sb_model_free(m);
}

static void test_writers(void) {
    char dir[] = "/tmp/sb_progress_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(!"mkdtemp");
        return;
    }
    char a[64], b[64];
    snprintf(a, sizeof a, "%s/a.gguf", dir);
    snprintf(b, sizeof b, "%s/b.gguf", dir);
    /* synth */
    record r = {.monotone = true, .same_total = true};
    sb_synth_params sp = {.type_name = "F32", .n_threads = 2, .progress = on_progress, .progress_user = &r};
    sb_status st = sb_synth_model("tiny-llama", a, &sp);
    CHECKF(st == SB_OK, "synth: %s %s", sb_status_str(st), sb_last_error());
    expect_complete(&r, "sb_synth_model");
    record c = {.monotone = true, .same_total = true, .cancel_at = 2};
    sp.progress_user = &c;
    st = sb_synth_model("tiny-llama", b, &sp);
    CHECKF(st == SB_ERR_CANCELLED && c.calls == 2, "cancelled synth: %s", sb_status_str(st));
    CHECK(access(b, F_OK) != 0);
    const char *only_a[] = {"a.gguf", NULL};
    CHECK(dir_holds_only(dir, only_a));
    /* quantize */
    record q = {.monotone = true, .same_total = true};
    sb_quantize_params qp = {.n_threads = 2, .progress = on_progress, .progress_user = &q};
    st = sb_quantize_file(a, b, "Q8_0", &qp);
    CHECKF(st == SB_OK, "quantize: %s %s", sb_status_str(st), sb_last_error());
    expect_complete(&q, "sb_quantize_file");
    unlink(b);
    record qc = {.monotone = true, .same_total = true, .cancel_at = 2};
    qp.progress_user = &qc;
    st = sb_quantize_file(a, b, "Q4_K_M", &qp);
    CHECKF(st == SB_ERR_CANCELLED && qc.calls == 2, "cancelled quantize: %s", sb_status_str(st));
    CHECK(access(b, F_OK) != 0);
    CHECK(dir_holds_only(dir, only_a));
    unlink(a);
    rmdir(dir);
}

int main(void) {
    test_load();
    test_writers();
    return test_summary();
}
