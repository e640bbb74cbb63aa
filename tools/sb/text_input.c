/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/text_input.c — bounded whole-file reads and -e escape processing (text_input.h).
 * read(2) on a descriptor rather than stdio, so the reason printed is the one read() reported; a
 * named FIFO goes through args.c's read_file_capped, which never waits on one without a writer.
 */
#include "text_input.h"
#include "args.h"
#include "sb.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *fail(const char *status, const char *path, const char *why) {
    fprintf(stderr, "error: %s: ", status);
    sb_put_safe(stderr, path, strlen(path), 0); /* a path may hold control characters */
    fprintf(stderr, ": %s\n", why);
    return NULL;
}

static const char *shown(const char *path) { return strcmp(path, "-") ? path : "standard input"; }

/* Read fd to its end into a growing buffer, at most cap + 1 bytes. NULL (message printed) on error. */
static char *read_all(int fd, const char *path, size_t cap, size_t *len) {
    size_t n = 0, size = 1 << 16;
    char *p = (char *)malloc(size + 1);
    if (!p) return fail("SB_ERR_OOM", shown(path), "out of memory");
    for (;;) {
        if (n == size) {
            if (n > cap) break;
            size_t want = size * 2 > cap + 1 ? cap + 1 : size * 2;
            char *q = (char *)realloc(p, want + 1);
            if (!q) {
                free(p);
                return fail("SB_ERR_OOM", shown(path), "out of memory");
            }
            p = q;
            size = want;
        }
        ssize_t k = read(fd, p + n, size - n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            char why[160];
            snprintf(why, sizeof why, "cannot be read: %s", strerror(errno));
            free(p);
            return fail("SB_ERR_IO", shown(path), why);
        }
        if (k == 0) break;
        n += (size_t)k;
    }
    if (n > cap) {
        char why[160];
        snprintf(why, sizeof why, "more than %zu MiB; a text input is limited to %zu MiB", cap >> 20, cap >> 20);
        free(p);
        return fail("SB_ERR_TEXT_TOO_LONG", shown(path), why);
    }
    p[n] = 0;
    *len = n;
    return p;
}

char *text_input_read(const char *path, size_t cap, size_t *len) {
    /* O_NONBLOCK: look at what the path is before anything can wait on it (a FIFO without a writer) */
    int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK) : 0;
    if (fd < 0) {
        char why[160];
        snprintf(why, sizeof why, "%s", strerror(errno));
        return fail("SB_ERR_IO", path, why);
    }
    struct stat sb;
    char *text = NULL;
    if (fstat(fd, &sb) != 0) fail("SB_ERR_IO", shown(path), strerror(errno));
    else if (S_ISDIR(sb.st_mode)) fail("SB_ERR_IO", shown(path), "is a directory, not a text file");
    else if (fd != 0 && !S_ISREG(sb.st_mode) && !S_ISFIFO(sb.st_mode))
        fail("SB_ERR_IO", path, S_ISCHR(sb.st_mode)   ? "is a character device, not a regular file or pipe"
                                : S_ISBLK(sb.st_mode) ? "is a block device, not a regular file or pipe"
                                                      : "is a socket, not a regular file or pipe");
    else if (fd != 0 && S_ISFIFO(sb.st_mode)) {
        /* a named FIFO: args.c's reader tells "no writer" from "nothing written yet" without waiting */
        close(fd);
        fd = 0;
        text = read_file_capped(path, cap >> 20, 1, len);
        if (!text) fprintf(stderr, "error: %s: %s\n", errno == EFBIG ? "SB_ERR_TEXT_TOO_LONG" : "SB_ERR_IO", read_file_error());
    } else if (S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > cap) {
        char why[160];
        snprintf(why, sizeof why, "%lld bytes, more than the %zu MiB a text input may hold", (long long)sb.st_size, cap >> 20);
        fail("SB_ERR_TEXT_TOO_LONG", shown(path), why);
    } else {
        if (fd != 0) (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        text = read_all(fd, path, cap, len);
    }
    if (fd != 0) close(fd);
    return text;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

size_t text_input_unescape(char *s, size_t len) {
    static const char from[] = "nrtabfv\\'\"?", to[] = "\n\r\t\a\b\f\v\\'\"?";
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '\\' || i + 1 == len) {
            s[o++] = s[i];
            continue;
        }
        char c = s[i + 1];
        const char *hit = c ? strchr(from, c) : NULL;
        if (hit) {
            s[o++] = to[hit - from];
            i++;
        } else if (c == 'x' && i + 3 < len && hex_digit(s[i + 2]) >= 0 && hex_digit(s[i + 3]) >= 0) {
            s[o++] = (char)(hex_digit(s[i + 2]) * 16 + hex_digit(s[i + 3]));
            i += 3;
        } else {
            s[o++] = s[i]; /* an unknown sequence stays as written */
        }
    }
    if (o < len) s[o] = 0;
    return o;
}
