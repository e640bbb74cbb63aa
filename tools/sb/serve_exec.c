/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/serve_exec.c — `sb serve ARGS`: runs the program sb-serve (tools/serve/, docs/serve.md)
 * with the same arguments, in this process (exec): the sb-serve beside this sb binary (the build
 * folder, or the install's bin/), else the first on PATH. Serving is its own program so that
 * libmicrohttpd and the TLS libraries it links load only to serve, not for every sb command.
 */
#include "sb.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int cmd_serve(int argc, char **argv) {
    (void)argc;
    static const char name[] = "sb-serve";
    char path[4096];
    argv[0] = (char *)name; /* argv[argc] is NULL, as main's */
    fflush(stdout);
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - sizeof name);
    if (n > 0) path[n] = 0;
    char *slash = n > 0 ? strrchr(path, '/') : NULL;
    if (slash) {
        memcpy(slash + 1, name, sizeof name);
        if (access(path, X_OK) == 0) execv(path, argv);
    }
    execvp(name, argv);
    fprintf(stderr, "error: SB_ERR_IO: cannot run %s (%s): it is built and installed beside sb\n", name, strerror(errno));
    return 1;
}
