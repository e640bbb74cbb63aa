/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/serve/main.c — the program sb-serve, which `sb serve` runs (tools/sb/serve_exec.c): the
 * same start-up as sb (the SIGBUS line for a truncated model, library warnings on stderr, a
 * header/library version check, standard output checked at exit), then serve_main. Exit status as
 * sb's: 0, 1 failure, 2 usage error.
 */
#include "cli_io.h"
#include "sb.h"
#include "serve.h"

#include <stdio.h>

int main(int argc, char **argv) {
    cli_io_init();
    sb_log_set(sb_cli_log, NULL, SB_LOG_WARN);
    if (sb_version_number() != SB_VERSION_NUMBER) {
        fprintf(stderr, "error: sb serve was built for libsonicboom %s but loaded %s\n", SB_VERSION_STRING, sb_version_string());
        return 1;
    }
    return cli_io_finish(serve_main(argc, argv));
}
