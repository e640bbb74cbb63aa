/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/codegen/emu/emu_build.h — for the C tests that run hand-written device code on the CPU
 * (tests/runtime/test_cuda_*_emu.c): build one C++ driver (a tests/ file including the device
 * headers) with the host compiler against cuda_emu.h, alignment-checked (-fsanitize=alignment with
 * traps: a load the GPU would fault on kills the caller), into a scratch folder, and dlopen it;
 * SKIP (exit 77) without a host C++ compiler.
 * Include after tests/test.h (CHECKF). Runs from the repository root.
 */
#ifndef SB_TESTS_EMU_BUILD_H
#define SB_TESTS_EMU_BUILD_H

#include <dlfcn.h>
#include <unistd.h>

static char emu_dir[64]; /* the scratch folder of the build (one a test) */

/* the driver `src` built into a scratch folder (emu_dir) and loaded — NULL after a failed check,
 * which says why; without a host C++ compiler the test SKIPs (exit 77) here. emu_build_done unloads
 * it and removes the folder. */
static void *emu_build(const char *src) {
    const char *cxx = test_host_cxx();
    if (!cxx) {
        printf("SKIP: no host C++ compiler ($CXX or c++) to run the emulated device code\n");
        exit(77);
    }
    if (access("tests/codegen/emu/cuda_emu.h", R_OK) != 0 || access(src, R_OK) != 0) {
        CHECKF(0, "run from the repository root (tests/codegen/emu/cuda_emu.h, %s)", src);
        return NULL;
    }
    snprintf(emu_dir, sizeof emu_dir, "/tmp/sb_emu.XXXXXX");
    if (!mkdtemp(emu_dir)) {
        CHECKF(0, "mkdtemp %s", emu_dir);
        emu_dir[0] = 0;
        return NULL;
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s -std=c++17 -O1 -w -ffp-contract=off -fPIC -shared -fsanitize=alignment -fsanitize-undefined-trap-on-error "
             "-include tests/codegen/emu/cuda_emu.h -Itests/codegen/emu -Isrc -Iinclude %s -o %s/emu.so",
             cxx, src, emu_dir);
    const int rc = system(cmd);
    CHECKF(rc == 0, "host compile failed: %s", cmd);
    if (rc) return NULL;
    snprintf(cmd, sizeof cmd, "%s/emu.so", emu_dir);
    void *h = dlopen(cmd, RTLD_NOW | RTLD_LOCAL);
    CHECKF(h != NULL, "dlopen: %s", dlerror());
    return h;
}

static void emu_build_done(void *h) {
    if (h) dlclose(h);
    if (!emu_dir[0]) return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", emu_dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", emu_dir);
}

#endif
