/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/progress.c — the progress bar and summary line of progress.h, and the log printer
 * (sb_cli_log) that erases a drawn bar before a log line. Layer 3 (tools): public header only.
 * Drawing: "\r\033[K" + "LABEL [#####.....]  42.0%  ITEM", on stderr only when it is a terminal.
 */
#include "progress.h"
#include "args.h"
#include "sb.h"

#include <stdio.h>
#include <unistd.h>

static int bar_on_screen;

static void erase_bar(void) {
    if (!bar_on_screen) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    bar_on_screen = 0;
}

void sb_cli_log(sb_log_level level, const char *msg, void *user) {
    (void)user;
    erase_bar();
    fprintf(stderr, "%s: %s\n",
            level == SB_LOG_ERROR ? "error" : level == SB_LOG_WARN ? "warning" : level == SB_LOG_INFO ? "info" : "debug", msg);
}

void cli_progress_start(cli_progress *p, const char *label) {
    *p = (cli_progress){.label = label, .tty = isatty(2), .t0 = now_seconds(), .drawn_at = -1};
}

double cli_progress_seconds(const cli_progress *p) { return now_seconds() - p->t0; }

int cli_progress_cb(void *user, uint64_t done, uint64_t total, const char *what) {
    cli_progress *p = (cli_progress *)user;
    p->done = done;
    p->total = total;
    double now = now_seconds();
    if (!p->tty || (now - p->drawn_at < 0.1 && done < total)) return 0;
    p->drawn_at = now;
    enum { WIDTH = 30 };
    double f = total ? (double)done / (double)total : 1.0;
    int k = (int)(f * WIDTH + 0.5);
    char bar[WIDTH + 1];
    for (int i = 0; i < WIDTH; i++) bar[i] = i < k ? '#' : '.';
    bar[WIDTH] = 0;
    fprintf(stderr, "\r\033[K%s [%s] %5.1f%%  %.40s", p->label, bar, 100.0 * f, what ? what : "");
    fflush(stderr);
    bar_on_screen = 1;
    return 0;
}

void cli_progress_finish(cli_progress *p, int ok, const char *summary) {
    erase_bar();
    if (ok) fprintf(stderr, "%s in %.2f s\n", summary, cli_progress_seconds(p));
}

sb_status cli_load_model(const char *path, const sb_model_params *mp, sb_model **out) {
    sb_model_params p;
    if (mp) p = *mp;
    else sb_model_default_params(&p);
    cli_progress pr;
    cli_progress_start(&pr, "loading");
    p.progress = cli_progress_cb;
    p.progress_user = &pr;
    sb_status st = sb_model_load(path, &p, out);
    char summary[4096 + 64];
    snprintf(summary, sizeof summary, "loaded %s: %.1f MB of tensors", path, (double)pr.total / 1e6);
    cli_progress_finish(&pr, st == SB_OK, summary);
    return st;
}
