/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * base/file_io.c — safe input opening, the output rule (temp + rename or straight to a stream),
 * and the per-call SIGBUS guard (file_io.h).
 * Layer 0. POSIX (Linux): O_NONBLOCK opens, mkstemp-like O_EXCL temp names, sigsetjmp.
 */
#include "base/file_io.h"
#include "base/status.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *type_name(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

// ---- inputs ----

sb_status fio_open_regular(const char *path, int *fd, struct stat *st) {
    *fd = -1;
    if (!path || !*path) return sb_fail(SB_ERR_INVALID_ARG, "empty file path");
    /* O_NONBLOCK: opening a FIFO must not wait for a writer before we can look at it */
    int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (f < 0) return sb_fail(SB_ERR_IO, "%s: %s", path, strerror(errno));
    if (fstat(f, st) != 0) {
        int e = errno;
        close(f);
        return sb_fail(SB_ERR_IO, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st->st_mode)) {
        close(f);
        if (S_ISDIR(st->st_mode)) return sb_fail(SB_ERR_IO, "%s: is a directory", path);
        return sb_fail(SB_ERR_IO, "%s: is %s, not a regular file", path, type_name(st->st_mode));
    }
    int fl = fcntl(f, F_GETFL);
    if (fl >= 0) (void)fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
    *fd = f;
    return SB_OK;
}

sb_status fio_pread_all(int fd, const char *path, void *dst, size_t n, uint64_t off) {
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, (char *)dst + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return sb_fail(SB_ERR_IO, "%s: read: %s", path, strerror(errno));
        if (k == 0)
            return sb_fail(SB_ERR_IO, "%s: file changed size while loading (%zu of %zu bytes read)", path, got, n);
        got += (size_t)k;
    }
    return SB_OK;
}

// ---- outputs ----

/* Names that stand for an already-open descriptor: always streams. */
static int is_fd_name(const char *p) {
    return !strcmp(p, "/dev/stdout") || !strcmp(p, "/dev/stderr") || !strncmp(p, "/dev/fd/", 8) ||
           !strncmp(p, "/proc/self/fd/", 14);
}

sb_status fio_out_check(const char *path, fio_out_kind *kind, char *final_path, size_t final_cap) {
    if (!path || !*path) return sb_fail(SB_ERR_INVALID_ARG, "empty output path");
    if (strlen(path) + 16 >= final_cap) return sb_fail(SB_ERR_INVALID_ARG, "%.64s...: output path too long", path);
    *kind = FIO_OUT_STREAM;
    snprintf(final_path, final_cap, "%s", path);
    if (is_fd_name(path)) return SB_OK;
    struct stat st, lst;
    if (stat(path, &st) != 0) {
        if (errno != ENOENT) return sb_fail(SB_ERR_IO, "%s: %s", path, strerror(errno));
        if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode))
            return sb_fail(SB_ERR_IO, "%s: is a dangling symbolic link (refusing to write through it)", path);
        *kind = FIO_OUT_REPLACE; /* a new file; a missing folder fails at open with its errno */
        return SB_OK;
    }
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return SB_OK;
    if (!S_ISREG(st.st_mode))
        return sb_fail(SB_ERR_IO, "%s: is %s (refusing to write over it)", path, type_name(st.st_mode));
    *kind = FIO_OUT_REPLACE;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        char resolved[PATH_MAX];
        if (!realpath(path, resolved)) return sb_fail(SB_ERR_IO, "%s: %s", path, strerror(errno));
        if (strlen(resolved) + 16 >= final_cap) return sb_fail(SB_ERR_INVALID_ARG, "%s: output path too long", resolved);
        snprintf(final_path, final_cap, "%s", resolved);
    }
    return SB_OK;
}

static sb_status open_stream(const char *path, fio_out *o) {
    /* O_NONBLOCK: a FIFO with no reader fails with ENXIO instead of waiting forever */
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (is_fd_name(path) ? O_APPEND : 0));
    if (fd < 0 && errno == ENXIO) return sb_fail(SB_ERR_IO, "%s: a FIFO that no process reads", path);
    if (fd < 0) return sb_fail(SB_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || (!is_fd_name(path) && !S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))) {
        close(fd); /* replaced between the check and the open */
        return sb_fail(SB_ERR_IO, "%s: changed while being opened", path);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    o->fd = fd;
    return SB_OK;
}

static sb_status open_temp(fio_out *o, mode_t keep_mode, int keep) {
    static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)o;
    for (int attempt = 0; attempt < 100; attempt++) {
        char suffix[7];
        for (int i = 0; i < 6; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            suffix[i] = digits[(x >> 33) % 36];
        }
        suffix[6] = 0;
        size_t n = strlen(o->path); /* fio_out_check left room for the suffix */
        memcpy(o->tmp, o->path, n);
        memcpy(o->tmp + n, ".tmp.", 5);
        memcpy(o->tmp + n + 5, suffix, 7);
        int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
        if (fd < 0 && errno == EEXIST) continue;
        if (fd < 0) {
            o->tmp[0] = 0;
            return sb_fail(SB_ERR_IO, "%s: creating a temporary file beside it: %s", o->path, strerror(errno));
        }
        if (keep) (void)fchmod(fd, keep_mode & 07777);
        o->fd = fd;
        return SB_OK;
    }
    o->tmp[0] = 0;
    return sb_fail(SB_ERR_IO, "%s: no free temporary file name beside it", o->path);
}

sb_status fio_out_open(const char *path, fio_out *o) {
    memset(o, 0, sizeof *o);
    o->fd = -1;
    SB_TRY(fio_out_check(path, &o->kind, o->path, sizeof o->path));
    if (o->kind == FIO_OUT_STREAM) return open_stream(o->path, o);
    struct stat st;
    int exists = stat(o->path, &st) == 0 && S_ISREG(st.st_mode);
    return open_temp(o, exists ? st.st_mode : 0, exists);
}

sb_status fio_out_write(fio_out *o, const void *p, size_t n) {
    const char *c = (const char *)p;
    while (n) {
        ssize_t k = write(o->fd, c, n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            sb_status s = sb_fail(SB_ERR_IO, "%s: write: %s", o->path, strerror(errno));
            fio_out_abort(o);
            return s;
        }
        c += k;
        n -= (size_t)k;
    }
    return SB_OK;
}

static void sync_folder(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) slash[1] = 0;
    else if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

sb_status fio_out_commit(fio_out *o) {
    if (o->fd < 0) return sb_fail(SB_ERR_INVALID_ARG, "%s: output already closed", o->path);
    sb_status s = SB_OK;
    if (o->kind == FIO_OUT_REPLACE && fsync(o->fd) != 0) s = sb_fail(SB_ERR_IO, "%s: fsync: %s", o->tmp, strerror(errno));
    if (close(o->fd) != 0 && s == SB_OK) s = sb_fail(SB_ERR_IO, "%s: close: %s", o->path, strerror(errno));
    o->fd = -1;
    if (o->kind == FIO_OUT_REPLACE) {
        if (s == SB_OK && rename(o->tmp, o->path) != 0)
            s = sb_fail(SB_ERR_IO, "rename %s -> %s: %s", o->tmp, o->path, strerror(errno));
        if (s != SB_OK) unlink(o->tmp);
        else sync_folder(o->path);
        o->tmp[0] = 0;
    }
    return s;
}

void fio_out_abort(fio_out *o) {
    if (o->fd >= 0) close(o->fd);
    o->fd = -1;
    if (o->tmp[0]) unlink(o->tmp);
    o->tmp[0] = 0;
}

// ---- the SIGBUS guard ----

typedef struct guard {
    const char *base;
    size_t size;
    sigjmp_buf env;
} guard;

/* Our handler is installed while at least one thread is inside fio_guarded (guard_users), and the
 * handler found before the first of them is put back when the last leaves. guard_mu is held only
 * around that bookkeeping, never while fn runs: guarded calls on different threads overlap. */
static pthread_mutex_t guard_mu = PTHREAD_MUTEX_INITIALIZER;
static int guard_users;
static struct sigaction guard_prev;
static _Thread_local guard *volatile guard_active;

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    guard *g = guard_active;
    if (g && (uintptr_t)si->si_addr - (uintptr_t)g->base < g->size) siglongjmp(g->env, 1);
    /* not a fault of a guarded mapping: give the process back the handler it had, then let it act
     * (it may not return, e.g. longjmp or exit: nothing of ours is left installed or pointing at
     * this thread's stack) */
    guard_active = NULL;
    struct sigaction prev = guard_prev;
    sigaction(SIGBUS, &prev, NULL);
    if (prev.sa_flags & SA_SIGINFO) prev.sa_sigaction(sig, si, uc);
    else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) prev.sa_handler(sig);
    else signal(SIGBUS, SIG_DFL); /* the faulting access repeats and takes the default action */
}

static void guard_enter(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    pthread_mutex_lock(&guard_mu);
    struct sigaction now;
    /* ours is not installed: no one is inside, or on_sigbus handed a foreign fault back (and that
     * handler may have jumped out of a guarded call without guard_leave): start afresh */
    if (sigaction(SIGBUS, NULL, &now) == 0 && !((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_sigbus)) guard_users = 0;
    if (guard_users++ == 0) sigaction(SIGBUS, &sa, &guard_prev);
    pthread_mutex_unlock(&guard_mu);
}

static void guard_leave(void) {
    pthread_mutex_lock(&guard_mu);
    if (--guard_users == 0) {
        struct sigaction now;
        /* put the old handler back unless on_sigbus already did (then whatever is there stays) */
        if (sigaction(SIGBUS, NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_sigbus)
            sigaction(SIGBUS, &guard_prev, NULL);
    }
    pthread_mutex_unlock(&guard_mu);
}

sb_status fio_guarded(const char *path, const void *base, size_t size, sb_status (*fn)(void *), void *ctx) {
    guard g = {.base = (const char *)base, .size = size};
    guard_enter();
    volatile sb_status s = SB_OK;
    if (sigsetjmp(g.env, 1) == 0) {
        guard_active = &g;
        s = fn(ctx);
    } else {
        s = sb_fail(SB_ERR_IO, "%s: file changed size while loading (truncated after it was opened)", path);
    }
    guard_active = NULL;
    guard_leave();
    return s;
}
