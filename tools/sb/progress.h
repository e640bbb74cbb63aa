/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/progress.h — the progress display of the long operations (loading a model, quantize,
 * synth), one for all of them: on a terminal (stderr is a tty) a bar redrawn at most 10 times a
 * second, erased at the end; then, terminal or not, one summary line. Never a bar in a log file
 * or a pipe. Library log lines (sb_cli_log) erase a drawn bar first. Public header only.
 */
#ifndef SB_TOOLS_PROGRESS_H
#define SB_TOOLS_PROGRESS_H

#include "sonicboom.h"

typedef struct cli_progress {
    const char *label;      /* "loading", "quantizing", ... shown before the bar */
    int tty;                /* stderr is a terminal */
    double t0, drawn_at;    /* start, last redraw (now_seconds) */
    uint64_t done, total;   /* the last report */
} cli_progress;

void cli_progress_start(cli_progress *p, const char *label);

/* An sb_progress_fn: user is a cli_progress. Records the counts and draws the bar on a terminal.
 * Never cancels (returns 0). */
int cli_progress_cb(void *user, uint64_t done, uint64_t total, const char *what);

/* Erase the bar; on success (ok != 0) print the summary line "<summary> in X.XX s" to stderr. */
void cli_progress_finish(cli_progress *p, int ok, const char *summary);

/* sb_model_load with the display: a bar while the tensor data is read, then "loaded PATH: N MB
 * of tensors in X.XX s" (mp may be NULL: defaults). */
sb_status cli_load_model(const char *path, const sb_model_params *mp, sb_model **out);

/* Seconds since cli_progress_start. */
double cli_progress_seconds(const cli_progress *p);

#endif
