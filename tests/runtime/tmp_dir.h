/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/tmp_dir.h — the private scratch folder of a test that writes files (include after
 * test.h; one per test program): tmp_dir_create("tag") makes /tmp/sb-test-<tag>-XXXXXX,
 * tmp_path(name) names a file in it (four rotating buffers: up to four paths live at once),
 * file_exists, and tmp_dir_remove (rmdir: the test unlinks its own files first, so a leftover file
 * keeps the folder for inspection). For tests whose reference part needs the shared data:
 * shared_file finds a shared-data file or says SKIP, and test_summary_or_skip ends the test with
 * 77 (SKIP) only when everything else passed and that part could not run.
 */
#ifndef SB_TESTS_TMP_DIR_H
#define SB_TESTS_TMP_DIR_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];

/* 1 when the folder was made; 0 after perror. */
static inline int tmp_dir_create(const char *tag) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sb-test-%s-XXXXXX", tag);
    if (mkdtemp(tmpdir)) return 1;
    perror("mkdtemp");
    return 0;
}

static inline void tmp_dir_remove(void) { rmdir(tmpdir); }

static inline const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static inline int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* Copies the shared-data path of rel into buf[8192]; 1 when the file is there, else 0 after a
 * "SKIP <what>: shared data absent (path)" line. */
static inline int shared_file(const char *rel, char buf[8192], const char *what) {
    snprintf(buf, 8192, "%s", test_data_path(rel));
    if (file_exists(buf)) return 1;
    printf("SKIP %s: shared data absent (%s)\n", what, buf);
    return 0;
}

/* test_summary(), but 77 (SKIP) when every check passed and the shared-data part did not run. */
static inline int test_summary_or_skip(int ran) {
    int rc = test_summary();
    return rc == 0 && !ran ? 77 : rc;
}

#endif
