/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/args.c — shared option parsing for the `sb` subcommands (args.h).
 */
#include "args.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int usage_error(const char *cmd, const char *fmt, ...) {
    char why[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    fprintf(stderr, "sb %s: %s (see 'sb %s --help')\n", cmd, why, cmd);
    return 2;
}

static int need_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) return usage_error(cmd, "option %s needs a value", argv[*i]);
    return 0;
}

const char *parse_int(const char *v, int64_t lo, int64_t hi, int64_t *out) {
    static char why[96];
    const char *p = v;
    int neg = *p == '-';
    if (neg) p++;
    if (!*v) return "an empty value";
    if (*p < '0' || *p > '9') return "not a decimal integer";
    uint64_t mag = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (mag > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) mag = UINT64_MAX; /* saturate: out of range below */
        else mag = mag * 10 + (uint64_t)(*p - '0');
    }
    if (*p) return "trailing characters after the number";
    /* decimal only (leading zeros do not mean octal); the sign applied without overflow */
    int fits = neg ? mag <= (uint64_t)INT64_MAX + 1 : mag <= (uint64_t)INT64_MAX;
    int64_t x = !fits ? 0 : neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
    if (!fits || x < lo || x > hi) {
        snprintf(why, sizeof why, "out of range [%lld, %lld]", (long long)lo, (long long)hi);
        return why;
    }
    *out = x;
    return NULL;
}

int arg_i64(const char *cmd, int argc, char **argv, int *i, int64_t lo, int64_t hi, int64_t *out) {
    if (need_value(cmd, argc, argv, i)) return 2;
    const char *opt = argv[*i], *v = argv[++*i];
    const char *why = parse_int(v, lo, hi, out);
    if (why && !strncmp(why, "out of range", 12)) return usage_error(cmd, "%s '%s': %s", opt, v, why);
    if (why) return usage_error(cmd, "%s '%s': %s (expected an integer in [%lld, %lld])", opt, v, why, (long long)lo, (long long)hi);
    return 0;
}

int arg_f32(const char *cmd, int argc, char **argv, int *i, float lo, float hi, float *out) {
    if (need_value(cmd, argc, argv, i)) return 2;
    const char *opt = argv[*i], *v = argv[++*i];
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    /* the bounds are floats: compare the value as the float it becomes (0.001 is not below 1e-3f) */
    int plain = (*v >= '0' && *v <= '9') || *v == '-' || *v == '.'; /* no spaces, "inf", "nan", hex */
    if (!plain || errno || end == v || *end || !isfinite(x) || (float)x < lo || (float)x > hi || strpbrk(v, "xXpP"))
        return usage_error(cmd, "%s '%s': expected a decimal number in [%g, %g]", opt, v, lo, hi);
    *out = (float)x;
    return 0;
}

int arg_str(const char *cmd, int argc, char **argv, int *i, const char **out) {
    if (need_value(cmd, argc, argv, i)) return 2;
    *out = argv[++*i];
    return 0;
}

/* -ngl N > 0 asks for the GPU the way llama.cpp does: without a usable one (no driver, no device,
 * a build without CUDA) it warns in one line and runs on the CPU. */
static int ngl_device(const char *cmd, const char *opt, int64_t ngl) {
    sb_backend_info bi;
    memset(&bi, 0, sizeof bi);
    if (sb_backend_get_info(&bi) == SB_OK && bi.cuda_devices > 0) return SB_DEVICE_CUDA;
    fprintf(stderr, "sb %s: warning: %s %lld: no usable GPU (%s); running on the CPU\n", cmd, opt, (long long)ngl,
            !bi.cuda_compiled ? "CUDA not compiled in" : bi.cuda_error[0] ? bi.cuda_error : "no CUDA device");
    return SB_DEVICE_CPU;
}

int arg_device(const char *cmd, int argc, char **argv, int *i, int *device, int *rc) {
    const char *a = argv[*i];
    if (!strcmp(a, "--device")) {
        const char *v = NULL;
        *rc = arg_str(cmd, argc, argv, i, &v);
        if (*rc) return 1;
        if (!strcmp(v, "auto")) *device = SB_DEVICE_AUTO;
        else if (!strcmp(v, "cpu")) *device = SB_DEVICE_CPU;
        else if (!strcmp(v, "cuda")) *device = SB_DEVICE_CUDA;
        else {
            *rc = usage_error(cmd, "--device '%s': expected auto, cpu or cuda", v);
        }
        return 1;
    }
    if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers")) {
        int64_t ngl = 0;
        *rc = arg_i64(cmd, argc, argv, i, 0, 1 << 30, &ngl);
        if (!*rc) *device = ngl > 0 ? ngl_device(cmd, a, ngl) : SB_DEVICE_CPU;
        return 1;
    }
    return 0;
}

const char *default_model_path(void) {
    const char *env = getenv("SB_MODEL");
    if (env && *env) return env;
#ifdef SB_INSTALLED_MODEL_REL
    /* an installed sb: the model installed beside it, <bin>/../share/sonicboom/NAME */
    static char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n > 0) {
        path[n] = 0;
        char *slash = strrchr(path, '/');
        if (slash && (size_t)(slash + 1 - path) + sizeof SB_INSTALLED_MODEL_REL <= sizeof path) {
            memcpy(slash + 1, SB_INSTALLED_MODEL_REL, sizeof SB_INSTALLED_MODEL_REL);
            if (access(path, R_OK) == 0) return path;
        }
    }
#endif
#ifdef SB_DEFAULT_MODEL
    if (access(SB_DEFAULT_MODEL, R_OK) == 0) return SB_DEFAULT_MODEL;
#endif
    return NULL;
}

static char read_error[4200];

const char *read_file_error(void) { return read_error; }

static char *read_fail(int fd, char *buf, int err, const char *fmt, const char *path, const char *what) {
    if (fd >= 0) close(fd);
    free(buf);
    /* the path may hold control characters: the reason is printed, so escape them as sb_fail does */
    char raw[sizeof read_error];
    snprintf(raw, sizeof raw, fmt, path, what);
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)raw; *p && o + 5 < sizeof read_error; p++)
        o += *p < 0x20 || *p == 0x7F ? (size_t)snprintf(read_error + o, sizeof read_error - o, "\\x%02x", *p)
                                     : (size_t)snprintf(read_error + o, sizeof read_error - o, "%c", *p);
    read_error[o] = 0;
    errno = err;
    return NULL;
}

static const char *kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return S_ISFIFO(m) ? "a FIFO" : "not a regular file";
}

char *read_file_capped(const char *path, size_t max_mib, int allow_pipe, size_t *len) {
    const size_t cap = max_mib << 20;
    /* O_NONBLOCK: look at what it is before anything can wait on it (a FIFO without a writer) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) return read_fail(-1, NULL, errno, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) return read_fail(fd, NULL, errno, "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return read_fail(fd, NULL, EISDIR, "%s: is %s", path, "a directory");
    if (!S_ISREG(st.st_mode) && !(allow_pipe && S_ISFIFO(st.st_mode)))
        return read_fail(fd, NULL, EINVAL, allow_pipe ? "%s: is %s, not a regular file or pipe" : "%s: is %s, not a regular file",
                         path, kind_of(st.st_mode));
    char what[64];
    snprintf(what, sizeof what, "%zu MiB", max_mib);
    if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > cap)
        return read_fail(fd, NULL, EFBIG, "%s: larger than the %s limit", path, what);
    size_t n = 0, room = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : (size_t)1 << 16;
    char *p = (char *)malloc(room + 1);
    struct stat lst;
    if (p && S_ISFIFO(st.st_mode) && lstat(path, &lst) == 0 && S_ISFIFO(lst.st_mode)) {
        /* a named FIFO: one non-blocking read tells "no writer" (0) from "writer, no data yet" */
        ssize_t k = read(fd, p, room);
        if (k == 0) return read_fail(fd, p, EPIPE, "%s: %s", path, "a FIFO that no process writes to");
        if (k > 0) n = (size_t)k;
    }
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    for (;;) {
        if (!p) return read_fail(fd, NULL, ENOMEM, "%s: %s", path, strerror(ENOMEM));
        if (n == room) {
            size_t more = room * 2 > cap + 1 ? cap + 1 : room * 2;
            char *q = (char *)realloc(p, more + 1);
            if (!q) return read_fail(fd, p, ENOMEM, "%s: %s", path, strerror(ENOMEM));
            p = q;
            room = more;
        }
        ssize_t k = read(fd, p + n, room - n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return read_fail(fd, p, errno, "%s: %s", path, strerror(errno));
        if (k == 0) break;
        n += (size_t)k;
        if (n > cap) return read_fail(fd, p, EFBIG, "%s: larger than the %s limit", path, what);
    }
    close(fd);
    p[n] = 0;
    *len = n;
    return p;
}

char *read_text_file(const char *path, size_t *len) { return read_file_capped(path, SB_TEXT_FILE_MAX_MIB, 1, len); }

int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
