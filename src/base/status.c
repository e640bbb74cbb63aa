/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * base/status.c — status names, the thread-local error text, logging, SB_ASSERT's failure path.
 * Layer 0. The error buffer is per thread (C11 _Thread_local); texts longer than the buffer are
 * cut with "..." (the status code is what programs test; the text is for people).
 * Invariant: every message is formatted into a scratch buffer and then copied (sb_failv, the one
 * format path), so an argument may point into the error buffer itself, e.g.
 * sb_fail(s, "ctx: %s", sb_last_error()) — vsnprintf with overlapping output is undefined. The
 * copy escapes control characters and malformed UTF-8 (\xHH), since messages quote paths and
 * file strings.
 */
#include "base/status.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

static _Thread_local char err_text[1024];

// ---- status names ----

const char *sb_status_str(sb_status s) {
    switch (s) {
#define N(x) case x: return #x;
    N(SB_OK) N(SB_ERR_INVALID_ARG) N(SB_ERR_IO) N(SB_ERR_FORMAT) N(SB_ERR_UNSUPPORTED) N(SB_ERR_OOM)
    N(SB_ERR_DEVICE) N(SB_ERR_CONTEXT_FULL) N(SB_ERR_CANCELLED) N(SB_ERR_INTERNAL) N(SB_ERR_NOT_FOUND)
    N(SB_ERR_RANGE) N(SB_ERR_BUFFER_TOO_SMALL) N(SB_ERR_NUMERIC)
    N(SB_ERR_FORMAT_TRUNCATED) N(SB_ERR_FORMAT_MAGIC) N(SB_ERR_FORMAT_VERSION) N(SB_ERR_FORMAT_ENDIAN)
    N(SB_ERR_FORMAT_COUNT) N(SB_ERR_FORMAT_STRING_LEN) N(SB_ERR_FORMAT_KEY_EMPTY)
    N(SB_ERR_FORMAT_KEY_DUPLICATE) N(SB_ERR_FORMAT_VALUE_TYPE) N(SB_ERR_FORMAT_NESTED_ARRAY)
    N(SB_ERR_FORMAT_ARRAY_LEN) N(SB_ERR_FORMAT_BOOL) N(SB_ERR_FORMAT_ALIGNMENT) N(SB_ERR_FORMAT_KEY_TYPE)
    N(SB_ERR_FORMAT_BUDGET) N(SB_ERR_FORMAT_TENSOR_NAME) N(SB_ERR_FORMAT_TENSOR_DUPLICATE)
    N(SB_ERR_FORMAT_TENSOR_DIMS) N(SB_ERR_FORMAT_TENSOR_SHAPE) N(SB_ERR_FORMAT_TENSOR_OVERFLOW)
    N(SB_ERR_FORMAT_TENSOR_TYPE) N(SB_ERR_FORMAT_TENSOR_REMOVED_TYPE) N(SB_ERR_FORMAT_TENSOR_BLOCK)
    N(SB_ERR_FORMAT_TENSOR_ALIGN) N(SB_ERR_FORMAT_TENSOR_OVERLAP) N(SB_ERR_FORMAT_TENSOR_BOUNDS)
    N(SB_ERR_FORMAT_UNKNOWN_FILE) N(SB_ERR_FORMAT_KEY_NUL)
    N(SB_ERR_MODEL_ARCH) N(SB_ERR_MODEL_TENSOR_MISSING) N(SB_ERR_MODEL_TENSOR_SHAPE)
    N(SB_ERR_MODEL_TENSOR_TYPE) N(SB_ERR_MODEL_HPARAM) N(SB_ERR_MODEL_NAN) N(SB_ERR_MODEL_TENSOR_EXTRA)
    N(SB_ERR_VOCAB) N(SB_ERR_VOCAB_UNSUPPORTED) N(SB_ERR_TEXT_TOO_LONG)
#undef N
    }
    return "SB_ERR_UNKNOWN";
}

sb_status sb_status_family(sb_status s) {
    if (s >= 100 && s < 200) return SB_ERR_FORMAT;
    if (s >= 200 && s < 300) return SB_ERR_UNSUPPORTED;
    if (s >= 300 && s < 400) return SB_ERR_FORMAT;
    return s;
}

// ---- error text ----

const char *sb_last_error(void) { return err_text; }

void sb_error_clear(void) { err_text[0] = 0; }

/* Length of the well-formed UTF-8 sequence at p (n bytes left) that is not a C1 control, else 0. */
static size_t utf8_printable(const unsigned char *p, size_t n) {
    size_t len = p[0] >= 0xF0 && p[0] <= 0xF4 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC2 && p[0] < 0xE0 ? 2 : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    uint32_t c = len == 2 ? (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F)
               : len == 3 ? (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F)
                          : (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 | (uint32_t)(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
    int bad = c < 0xA0 || (len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10FFFF)) || (c >= 0xD800 && c <= 0xDFFF);
    return bad ? 0 : len;
}

/* Copy src to dst (cap bytes) with control characters (C0, DEL, C1) and bytes that are not
 * well-formed UTF-8 written as \xHH: a message may quote a file's strings or a path, and must
 * not drive the terminal that prints it or break the line it is printed on. */
static void copy_printable(char *dst, size_t cap, const char *src) {
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)src;
    while (*p && o + 5 + 3 < cap) { /* room for one \xHH, "..." and the NUL */
        size_t k = *p >= 0x20 && *p < 0x7F ? 1 : *p >= 0x80 ? utf8_printable(p, strlen((const char *)p)) : 0;
        if (k) {
            memcpy(dst + o, p, k);
            o += k;
            p += k;
        } else {
            o += (size_t)snprintf(dst + o, cap - o, "\\x%02x", *p++);
        }
    }
    if (*p) memcpy(dst + o, "...", 3), o += 3; /* cut: say so */
    dst[o] = 0;
}

sb_status sb_failv(sb_status s, const char *fmt, va_list ap) {
    char scratch[sizeof err_text];
    int n = vsnprintf(scratch, sizeof scratch, fmt, ap);
    if (n < 0) snprintf(scratch, sizeof scratch, "(unformattable error text \"%.64s\")", fmt);
    else if (n >= (int)sizeof scratch) memcpy(scratch + sizeof scratch - 4, "...", 4);
    copy_printable(err_text, sizeof err_text, scratch);
    return s;
}

sb_status sb_fail(sb_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sb_failv(s, fmt, ap);
    va_end(ap);
    return s;
}

sb_status sb_fail_context(sb_status s, const char *fmt, ...) {
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    return sb_fail(s, "%s: %s", prefix, err_text); /* sb_failv formats into scratch first */
}

// ---- logging ----

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static sb_log_fn log_fn;
static void *log_user;
static sb_log_level log_max = SB_LOG_INFO;

void sb_log_set(sb_log_fn fn, void *user, sb_log_level max_level) {
    pthread_mutex_lock(&log_mu);
    log_fn = fn;
    log_user = user;
    log_max = max_level;
    pthread_mutex_unlock(&log_mu);
}

int sb_log_enabled(sb_log_level level) {
    pthread_mutex_lock(&log_mu);
    int on = log_fn != NULL && level <= log_max;
    pthread_mutex_unlock(&log_mu);
    return on;
}

void sb_log(sb_log_level level, const char *fmt, ...) {
    pthread_mutex_lock(&log_mu);
    sb_log_fn fn = log_fn;
    void *user = log_user;
    int on = fn != NULL && level <= log_max;
    pthread_mutex_unlock(&log_mu);
    if (!on) return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fn(level, msg, user);
}

// ---- assert ----

__attribute__((noreturn)) void sb_assert_fail(const char *file, int line, const char *expr) {
    sb_log(SB_LOG_ERROR, "SB_ASSERT failed: %s:%d: %s", file, line, expr);
    fprintf(stderr, "sonicboom: internal error: %s:%d: SB_ASSERT(%s) failed\n", file, line, expr);
    abort();
}
