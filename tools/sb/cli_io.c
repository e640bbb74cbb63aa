/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/cli_io.c — stdout write-error discipline and the model-file SIGBUS handler (cli_io.h).
 * The handler only uses async-signal-safe calls (write, _exit).
 */
#include "cli_io.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *volatile watched;
static int stdout_errno; /* first write error on stdout, 0 if none */

static void put(const char *s) {
    size_t n = strlen(s);
    while (n) {
        ssize_t k = write(2, s, n);
        if (k <= 0) return;
        s += k;
        n -= (size_t)k;
    }
}

static int sigbus_taken; /* the first faulting thread reports; any other waits for its _exit */

static void on_sigbus(int sig) {
    (void)sig;
    if (__atomic_exchange_n(&sigbus_taken, 1, __ATOMIC_SEQ_CST))
        for (;;) pause(); /* lock-free, async-signal-safe: two threads faulting at once print one line */
    const char *p = watched;
    if (p) {
        put("error: SB_ERR_IO: model file ");
        put(p);
        put(" was truncated or changed while in use (use --no-mmap to load it into memory)\n");
    } else {
        put("error: SB_ERR_IO: a mapped file was truncated or changed while in use\n");
    }
    _exit(1);
}

void cli_io_init(void) {
    /* Not a terminal: one 1 MiB buffer, so most outputs meet a write error at the final flush,
     * where its errno (ENOSPC) is still known; a terminal keeps stdio's line buffering. */
    if (!isatty(1)) setvbuf(stdout, NULL, _IOFBF, (size_t)1 << 20);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

void cli_watch_file(const char *path) { watched = path; }

int cli_stdout_write(const void *p, size_t n) {
    if (stdout_errno) return -1;
    errno = 0;
    if ((n && fwrite(p, 1, n, stdout) != n) || fflush(stdout) != 0) {
        stdout_errno = errno ? errno : EIO;
        return -1;
    }
    return 0;
}

int cli_stdout_failed(void) { return stdout_errno != 0 || ferror(stdout); }

int cli_io_finish(int rc) {
    errno = 0;
    int bad = fflush(stdout) != 0;
    if (bad && !stdout_errno) stdout_errno = errno ? errno : EIO;
    bad |= ferror(stdout) != 0;
    errno = 0;
    if (fclose(stdout) != 0) {
        if (!stdout_errno) stdout_errno = errno ? errno : EIO;
        bad = 1;
    }
    /* one line, unless the command already failed and said why (its own write check, as sb bench
     * has); a failure first seen by cli_stdout_write stopped the command silently, so say it here */
    if ((bad || stdout_errno) && (rc == 0 || stdout_errno)) {
        if (stdout_errno) fprintf(stderr, "error: SB_ERR_IO: standard output: %s\n", strerror(stdout_errno));
        else fprintf(stderr, "error: SB_ERR_IO: standard output: a write failed (the stream reports no reason)\n");
    }
    if (bad || stdout_errno) rc = rc == 2 ? 2 : 1;
    if (fflush(stderr) != 0 || ferror(stderr)) rc = rc ? rc : 1; /* nowhere left to say it */
    return rc;
}
