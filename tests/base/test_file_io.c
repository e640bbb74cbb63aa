/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/* tests/base/test_file_io.c — base/file_io: non-blocking regular-file opens, the output rule
 * (temp + rename, streams, refusals, no temp left behind), and the per-call SIGBUS guard (a fault
 * in the guarded mapping is SB_ERR_IO, the caller's handler is restored, other faults reach it). */
#include "base/file_io.h"
#include "base/status.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

static char dir[64];
static char *at(const char *name) {
    static char p[4][128];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static int n_entries(void) { /* files in dir, to see that no temp file is left */
    char cmd[160];
    snprintf(cmd, sizeof cmd, "ls -A %s | wc -l", dir);
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (f && fscanf(f, "%d", &n) != 1) n = -1;
    if (f) pclose(f);
    return n;
}

static void test_inputs(void) {
    int fd;
    struct stat st;
    CHECK(mkfifo(at("fifo"), 0600) == 0);
    CHECK(fio_open_regular(at("fifo"), &fd, &st) == SB_ERR_IO && strstr(sb_last_error(), "is a FIFO, not a regular file"));
    CHECK(fio_open_regular(dir, &fd, &st) == SB_ERR_IO && strstr(sb_last_error(), ": is a directory"));
    CHECK(fio_open_regular("/dev/zero", &fd, &st) == SB_ERR_IO && strstr(sb_last_error(), "character device"));
    CHECK(fio_open_regular(at("absent"), &fd, &st) == SB_ERR_IO && strstr(sb_last_error(), "No such file"));
    FILE *f = fopen(at("r.bin"), "wb");
    fputs("hello", f);
    fclose(f);
    CHECK(fio_open_regular(at("r.bin"), &fd, &st) == SB_OK && st.st_size == 5 && !(fcntl(fd, F_GETFL) & O_NONBLOCK));
    char buf[8];
    CHECK(fio_pread_all(fd, "r.bin", buf, 5, 0) == SB_OK && !memcmp(buf, "hello", 5));
    CHECK(fio_pread_all(fd, "r.bin", buf, 8, 0) == SB_ERR_IO && strstr(sb_last_error(), "file changed size while loading"));
    close(fd);
    unlink(at("fifo"));
}

static void test_outputs(void) {
    fio_out o;
    /* a new file: nothing at the path until commit, no temp file after */
    CHECK(fio_out_open(at("new.bin"), &o) == SB_OK && o.kind == FIO_OUT_REPLACE);
    CHECK(access(at("new.bin"), F_OK) != 0 && n_entries() == 2); /* r.bin + the temp */
    CHECK(fio_out_write(&o, "abc", 3) == SB_OK && fio_out_commit(&o) == SB_OK);
    CHECK(n_entries() == 2);
    struct stat st;
    CHECK(stat(at("new.bin"), &st) == 0 && st.st_size == 3);
    /* replacing: the old file stays whole until commit; abort leaves it and no temp */
    chmod(at("new.bin"), 0640);
    CHECK(fio_out_open(at("new.bin"), &o) == SB_OK && fio_out_write(&o, "x", 1) == SB_OK);
    fio_out_abort(&o);
    CHECK(stat(at("new.bin"), &st) == 0 && st.st_size == 3 && n_entries() == 2);
    CHECK(fio_out_open(at("new.bin"), &o) == SB_OK && fio_out_write(&o, "xy", 2) == SB_OK && fio_out_commit(&o) == SB_OK);
    CHECK(stat(at("new.bin"), &st) == 0 && st.st_size == 2 && (st.st_mode & 0777) == 0640);
    /* a symlink: the file it names is replaced, the link stays */
    CHECK(symlink("new.bin", at("link")) == 0);
    CHECK(fio_out_open(at("link"), &o) == SB_OK && fio_out_write(&o, "1234", 4) == SB_OK && fio_out_commit(&o) == SB_OK);
    CHECK(lstat(at("link"), &st) == 0 && S_ISLNK(st.st_mode) && stat(at("new.bin"), &st) == 0 && st.st_size == 4);
    /* streams and refusals */
    CHECK(fio_out_open("/dev/null", &o) == SB_OK && o.kind == FIO_OUT_STREAM);
    CHECK(fio_out_write(&o, "abc", 3) == SB_OK && fio_out_commit(&o) == SB_OK);
    CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));
    if (access("/dev/full", W_OK) == 0) {
        CHECK(fio_out_open("/dev/full", &o) == SB_OK);
        CHECK(fio_out_write(&o, "abc", 3) == SB_ERR_IO && strstr(sb_last_error(), "No space left on device"));
        fio_out_abort(&o);
    }
    CHECK(mkfifo(at("fifo"), 0600) == 0);
    CHECK(fio_out_open(at("fifo"), &o) == SB_ERR_IO && strstr(sb_last_error(), "a FIFO that no process reads"));
    CHECK(mkdir(at("d"), 0700) == 0);
    CHECK(fio_out_open(at("d"), &o) == SB_ERR_IO && strstr(sb_last_error(), "is a directory (refusing to write over it)"));
    CHECK(symlink("nowhere", at("dangling")) == 0);
    CHECK(fio_out_open(at("dangling"), &o) == SB_ERR_IO && strstr(sb_last_error(), "dangling symbolic link"));
    CHECK(fio_out_open("", &o) == SB_ERR_INVALID_ARG);
    unlink(at("fifo"));
    rmdir(at("d"));
    unlink(at("dangling"));
    unlink(at("link"));
    unlink(at("new.bin"));
}

// ---- SIGBUS guard ----

typedef struct touch { const volatile char *p; } touch;
static sb_status touch_run(void *ctx) {
    volatile char c = *((touch *)ctx)->p;
    (void)c;
    return SB_OK;
}

static sigjmp_buf mine;
static volatile int mine_hit;
static void my_handler(int sig) {
    (void)sig;
    mine_hit++;
    siglongjmp(mine, 1);
}

static void test_guard(void) {
    long pg = sysconf(_SC_PAGESIZE);
    int fd = open(at("m.bin"), O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && ftruncate(fd, 3 * pg) == 0);
    char *map = (char *)mmap(NULL, (size_t)(3 * pg), PROT_READ, MAP_SHARED, fd, 0);
    CHECK(map != MAP_FAILED);
    struct sigaction sa, now;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = my_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);

    touch t = {map + 2 * pg};
    CHECK(fio_guarded("m.bin", map, (size_t)(3 * pg), touch_run, &t) == SB_OK); /* within the file */
    CHECK(ftruncate(fd, pg) == 0);
    CHECK(fio_guarded("m.bin", map, (size_t)(3 * pg), touch_run, &t) == SB_ERR_IO);
    CHECK(strstr(sb_last_error(), "m.bin: file changed size while loading") != NULL);
    CHECK(mine_hit == 0);
    sigaction(SIGBUS, NULL, &now);
    CHECK(now.sa_handler == my_handler); /* the caller's handler is back */

    /* a fault outside the guarded range goes to the caller's handler */
    if (sigsetjmp(mine, 1) == 0) fio_guarded("m.bin", map, (size_t)pg, touch_run, &t);
    CHECK(mine_hit == 1);
    sigaction(SIGBUS, NULL, &now);
    CHECK(!(now.sa_flags & SA_SIGINFO) && now.sa_handler == my_handler); /* reinstated before it ran */
    /* and the guard still works after that jump out of it, and still restores */
    CHECK(fio_guarded("m.bin", map, (size_t)(3 * pg), touch_run, &t) == SB_ERR_IO && mine_hit == 1);
    sigaction(SIGBUS, NULL, &now);
    CHECK(!(now.sa_flags & SA_SIGINFO) && now.sa_handler == my_handler);
    signal(SIGBUS, SIG_DFL);
    munmap(map, (size_t)(3 * pg));
    close(fd);
    unlink(at("m.bin"));
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/sb-test-fio-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    test_inputs();
    test_outputs();
    test_guard();
    unlink(at("r.bin"));
    CHECK(rmdir(dir) == 0); /* nothing left behind */
    return test_summary();
}
