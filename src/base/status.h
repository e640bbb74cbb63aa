/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * base/status.h — status codes, the thread-local error text, SB_ASSERT and logging.
 * Layer 0 (base). Every layer reports failures as `return sb_fail(SB_ERR_X, "fmt", ...)`, which
 * records the detail text for sb_last_error() and returns the status.
 * Invariants: the library never prints and never exits on bad input; SB_ASSERT is only for broken
 * invariants (bugs) and stays on in release builds.
 * Non-goals: error stacks, localisation.
 */
#ifndef SB_BASE_STATUS_H
#define SB_BASE_STATUS_H

#include "sonicboom.h" /* sb_status, sb_log_level: the public enums are the single definition */

#include <stdarg.h>

#ifdef __cplusplus
extern "C" { /* also included by CUDA sources */
#endif

/* Record a formatted detail text for this thread and return s. */
sb_status sb_fail(sb_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
sb_status sb_failv(sb_status s, const char *fmt, va_list ap);

/* Prefix the current error text with "prefix: " (adds context while unwinding). Returns s. */
sb_status sb_fail_context(sb_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clear this thread's error text. */
void sb_error_clear(void);

/* Log through the user's callback (no-op when none is set or level is filtered). */
void sb_log(sb_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int sb_log_enabled(sb_log_level level);

/* Always-on invariant check: prints file:line and the expression through the log callback and
 * stderr, then aborts. Only for bugs, never for bad input. */
#define SB_ASSERT(cond)                                                                   \
    do {                                                                                  \
        if (__builtin_expect(!(cond), 0)) sb_assert_fail(__FILE__, __LINE__, #cond);      \
    } while (0)
__attribute__((noreturn)) void sb_assert_fail(const char *file, int line, const char *expr);

/* Propagate a failing status. */
#define SB_TRY(expr)                                  \
    do {                                              \
        sb_status sb_try_s_ = (expr);                 \
        if (sb_try_s_ != SB_OK) return sb_try_s_;     \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif
