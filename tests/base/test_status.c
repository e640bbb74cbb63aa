/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/* tests/base/test_status.c — status names, families, the thread-local error text, log routing. */
#include "base/status.h"
#include "base/hash.h"
#include "base/ckd.h"
#include "test.h"

#include <pthread.h>

static void *other_thread(void *arg) {
    (void)arg;
    sb_fail(SB_ERR_IO, "thread-local text");
    return NULL;
}

static int logged;
static void log_cb(sb_log_level lv, const char *msg, void *user) {
    (void)user;
    if (lv == SB_LOG_WARN && strcmp(msg, "w 7") == 0) logged++;
}

int main(void) {
    CHECK(strcmp(sb_status_str(SB_OK), "SB_OK") == 0);
    CHECK(strcmp(sb_status_str(SB_ERR_FORMAT_MAGIC), "SB_ERR_FORMAT_MAGIC") == 0);
    CHECK(strcmp(sb_status_str((sb_status)12345), "SB_ERR_UNKNOWN") == 0);
    CHECK(sb_status_family(SB_ERR_FORMAT_TENSOR_BOUNDS) == SB_ERR_FORMAT);
    CHECK(sb_status_family(SB_ERR_MODEL_ARCH) == SB_ERR_UNSUPPORTED);
    CHECK(sb_status_family(SB_ERR_OOM) == SB_ERR_OOM);
    /* every code from 0 to 400 either has its own name or is unknown; no two share a name */
    for (int a = 0; a < 400; a++)
        for (int b = a + 1; b < 400; b++)
            if (strcmp(sb_status_str((sb_status)a), "SB_ERR_UNKNOWN") != 0)
                CHECKF(strcmp(sb_status_str((sb_status)a), sb_status_str((sb_status)b)) != 0, "%d %d", a, b);

    CHECK(sb_fail(SB_ERR_RANGE, "value %d", 42) == SB_ERR_RANGE);
    CHECK(strcmp(sb_last_error(), "value 42") == 0);
    pthread_t t;
    pthread_create(&t, NULL, other_thread, NULL);
    pthread_join(t, NULL);
    CHECK(strcmp(sb_last_error(), "value 42") == 0); /* other thread's failure is not ours */
    sb_fail_context(SB_ERR_RANGE, "ctx");
    CHECK(strcmp(sb_last_error(), "ctx: value 42") == 0);
    /* the current text as an argument: chained prefixes come out exact (sb_failv formats into scratch) */
    sb_fail(SB_ERR_IO, "type f32");
    sb_fail(SB_ERR_IO, "%s: %s", "tensor \"blk.0.attn_q.weight\"", sb_last_error());
    sb_fail(SB_ERR_IO, "model.gguf: %s", sb_last_error());
    CHECK(strcmp(sb_last_error(), "model.gguf: tensor \"blk.0.attn_q.weight\": type f32") == 0);
    sb_fail(SB_ERR_RANGE, "18446744073709551615 does not fit");
    sb_fail(SB_ERR_RANGE, "%s (key %s)", sb_last_error(), "n_ctx");
    CHECK(strcmp(sb_last_error(), "18446744073709551615 does not fit (key n_ctx)") == 0);
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    sb_fail(SB_ERR_IO, "%s", big);
    CHECK(strlen(sb_last_error()) < 1024 && strstr(sb_last_error(), "...") != NULL);

    sb_log(SB_LOG_WARN, "w %d", 7); /* no callback: dropped */
    sb_log_set(log_cb, NULL, SB_LOG_WARN);
    sb_log(SB_LOG_WARN, "w %d", 7);
    sb_log(SB_LOG_DEBUG, "w %d", 7); /* filtered */
    sb_log_set(NULL, NULL, SB_LOG_INFO);
    CHECK(logged == 1);

    uint64_t r;
    CHECK(ckd_mul(&r, UINT64_MAX / 2, (uint64_t)3));
    CHECK(!ckd_mul(&r, (uint64_t)1 << 31, (uint64_t)1 << 31) && r == (uint64_t)1 << 62);
    CHECK(ckd_pad(&r, UINT64_MAX - 3, 32));
    CHECK(!ckd_pad(&r, 33, 32) && r == 64);

    sb_strview strs[1000];
    char store[1000][8];
    sb_strset set;
    CHECK(sb_strset_init(&set, 1000) == SB_OK);
    for (int i = 0; i < 1000; i++) {
        snprintf(store[i], sizeof store[i], "k%d", i % 700);
        strs[i] = (sb_strview){store[i], strlen(store[i])};
        int64_t prev = sb_strset_insert(&set, strs, i);
        CHECK(i < 700 ? prev == -1 : prev == i - 700);
    }
    CHECK(sb_strset_find(&set, strs, "k699", 4) == 699);
    CHECK(sb_strset_find(&set, strs, "k700", 4) == -1);
    sb_strset_free(&set);
    return test_summary();
}
