/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/cli_io.h — process-level I/O discipline of `sb`: standard output write errors (a full
 * disk, a closed pipe) become exit status 1 with one line on stderr, and a SIGBUS from a model
 * file truncated while mapped becomes one fatal line instead of a crash. Public header only.
 */
#ifndef SB_TOOLS_CLI_IO_H
#define SB_TOOLS_CLI_IO_H

#include <stddef.h>

/* Install the SIGBUS handler (main, once). The library installs none of its own beyond a load:
 * this is the program's choice (docs/runtime.md). */
void cli_io_init(void);

/* Name the file whose mapping a later SIGBUS is about; the handler prints
 * "error: SB_ERR_IO: model file PATH was truncated or changed while in use (use --no-mmap to load
 * it into memory)" and exits 1. path must outlive the command (argv strings do). */
void cli_watch_file(const char *path);

/* Write n bytes to stdout and flush: 0, or -1 after a write error (recorded for cli_io_finish;
 * streaming commands stop then). */
int cli_stdout_write(const void *p, size_t n);

/* Nonzero once a write to stdout has failed. */
int cli_stdout_failed(void);

/* At exit (main): flush and close stdout, check stderr; returns rc, or 1 after printing
 * "error: SB_ERR_IO: standard output: REASON" when stdout could not be written. */
int cli_io_finish(int rc);

#endif
