/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * codegen/cg_nvrtc.c — NVRTC, loaded with dlopen (no CUDA toolkit is needed to build or to load
 * libsonicboom): compile one generated source to a cubin for sm_XX (PTX for compute_XX when this
 * NVRTC is older than the GPU), with the embedded headers (cg_headers) as in-memory includes.
 * Layer 3 (codegen). Thread-safe: the library is loaded once (pthread_once); programs are per call.
 * Errors: no libnvrtc → SB_ERR_UNSUPPORTED naming every name tried (the executor then runs the
 * hand-written kernels); a compile error → SB_ERR_DEVICE with the kernel name and the first lines
 * of the NVRTC log. Nothing is printed.
 * Options: --gpu-architecture=sm_XX -default-device --std=c++17 -DSB_NVRTC=1 (NVRTC optimizes at
 * -O3 by default; no fast math: the kernels are tested against the f32 reference).
 */
#define _GNU_SOURCE 1 /* dladdr */
#include "codegen/cg.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;

static struct {
    void *lib;
    char why[1024];
    int version;
    const char *(*GetErrorString)(nvrtcResult);
    nvrtcResult (*Version)(int *, int *);
    nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *, const char *const *);
    nvrtcResult (*DestroyProgram)(nvrtcProgram *);
    nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
    nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetPTX)(nvrtcProgram, char *);
    nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
    nvrtcResult (*GetNumSupportedArchs)(int *);
    nvrtcResult (*GetSupportedArchs)(int *);
} nv;

static pthread_once_t nv_once = PTHREAD_ONCE_INIT;

static void nv_load(void) {
    /* a test may point at a specific library (or at nothing: SB_NVRTC_LIB=/nonexistent) */
    const char *forced = getenv("SB_NVRTC_LIB");
    static const char *names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so.11.1",
                                  "libnvrtc.so.11.0", "/usr/local/cuda/lib64/libnvrtc.so", "/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so"};
    size_t wl = 0;
    const int n = forced && *forced ? 1 : (int)(sizeof names / sizeof names[0]);
    for (int i = 0; i < n && !nv.lib; i++) {
        const char *nm = forced && *forced ? forced : names[i];
        nv.lib = dlopen(nm, RTLD_NOW | RTLD_LOCAL);
        if (!nv.lib && wl < sizeof nv.why - 1) {
            const char *e = dlerror();
            int k = snprintf(nv.why + wl, sizeof nv.why - wl, "%s%s", wl ? "; " : "", e ? e : nm);
            if (k > 0) wl += (size_t)k < sizeof nv.why - wl ? (size_t)k : sizeof nv.why - wl - 1;
        }
    }
    if (!nv.lib) return;
#define SYM(f, req)                                                                                          \
    do {                                                                                                     \
        *(void **)&nv.f = dlsym(nv.lib, "nvrtc" #f);                                                         \
        if (!nv.f && req) {                                                                                  \
            snprintf(nv.why, sizeof nv.why, "libnvrtc has no nvrtc" #f);                                     \
            dlclose(nv.lib);                                                                                 \
            nv.lib = NULL;                                                                                   \
            return;                                                                                          \
        }                                                                                                    \
    } while (0)
    SYM(GetErrorString, 1);
    SYM(Version, 1);
    SYM(CreateProgram, 1);
    SYM(DestroyProgram, 1);
    SYM(CompileProgram, 1);
    SYM(GetPTXSize, 1);
    SYM(GetPTX, 1);
    SYM(GetProgramLogSize, 1);
    SYM(GetProgramLog, 1);
    SYM(GetCUBINSize, 0); /* 11.1+ */
    SYM(GetCUBIN, 0);
    SYM(GetNumSupportedArchs, 0); /* 11.2+ */
    SYM(GetSupportedArchs, 0);
#undef SYM
    int ma = 0, mi = 0;
    if (nv.Version(&ma, &mi) == 0) nv.version = ma * 1000 + mi * 10;
    /* NVRTC opens libnvrtc-builtins.so.MAJ.MIN by name at its first compile: load it now from the
     * folder libnvrtc came from, so a libnvrtc found by absolute path (not on the loader path)
     * still finds its builtins (a failure here is harmless: NVRTC then searches as usual) */
    Dl_info di;
    if (dladdr(*(void **)&nv.Version, &di) && di.dli_fname) {
        char path[1024];
        const char *sl = strrchr(di.dli_fname, '/');
        if (sl && (size_t)(sl - di.dli_fname) < sizeof path - 64) {
            snprintf(path, sizeof path, "%.*s/libnvrtc-builtins.so.%d.%d", (int)(sl - di.dli_fname), di.dli_fname, ma, mi);
            if (!dlopen(path, RTLD_NOW | RTLD_GLOBAL)) (void)dlerror();
        }
    }
}

sb_status cg_nvrtc_load(void) {
    pthread_once(&nv_once, nv_load);
    if (!nv.lib) return sb_fail(SB_ERR_UNSUPPORTED, "codegen: NVRTC not available: %s", nv.why);
    return SB_OK;
}

int cg_nvrtc_version(void) {
    pthread_once(&nv_once, nv_load);
    return nv.lib ? nv.version : 0;
}

/* the newest arch this NVRTC compiles for, at most `want` (0 if it cannot say) */
static int best_arch(int want) {
    int n = 0, best = 0;
    if (!nv.GetNumSupportedArchs || nv.GetNumSupportedArchs(&n) != 0 || n <= 0 || n > 256) return 0;
    int a[256];
    if (nv.GetSupportedArchs(a) != 0) return 0;
    for (int i = 0; i < n; i++)
        if (a[i] <= want && a[i] > best) best = a[i];
    return best;
}

const char *cg_nvrtc_options(int arch, char *buf, size_t cap) {
    snprintf(buf, cap, "--gpu-architecture=sm_%d -default-device --std=c++17 -DSB_NVRTC=1", arch);
    return buf;
}

/* the log's error lines (with the line after each: the source line), else its first lines */
static void log_head(nvrtcProgram p, char *out, size_t cap) {
    out[0] = 0;
    size_t n = 0;
    if (nv.GetProgramLogSize(p, &n) != 0 || n <= 1) return;
    char *lg = (char *)malloc(n);
    if (!lg) return;
    if (nv.GetProgramLog(p, lg) == 0) {
        size_t w = 0;
        int shown = 0;
        for (char *line = lg; *line && shown < 8;) {
            char *end = strchr(line, '\n');
            size_t len = end ? (size_t)(end - line) : strlen(line);
            if (strstr(line, "error") && (size_t)(strstr(line, "error") - line) < len) {
                char *nx = end ? end + 1 : line + len, *ne = strchr(nx, '\n');
                size_t l2 = *nx ? (ne ? (size_t)(ne - nx) : strlen(nx)) : 0;
                int k = snprintf(out + w, cap - w, "%s%.*s%s%.*s", w ? " | " : "", (int)len, line, l2 ? " | " : "", (int)l2, nx);
                if (k < 0 || (size_t)k >= cap - w) break;
                w += (size_t)k;
                shown++;
            }
            line = end ? end + 1 : line + len;
        }
        if (!w) {
            int lines = 0;
            size_t k = 0;
            while (lg[k] && lines < 6) lines += lg[k++] == '\n';
            if (k > 0 && lg[k - 1] == '\n') k--;
            snprintf(out, cap, "%.*s", (int)k, lg);
        }
    }
    free(lg);
}

sb_status cg_nvrtc_compile(const char *src, const char *name, int arch, uint8_t **bin, size_t *n, bool *is_ptx) {
    *bin = NULL;
    *n = 0;
    *is_ptx = false;
    SB_TRY(cg_nvrtc_load());
    if (arch < 50 || arch > 1000) return sb_fail(SB_ERR_INVALID_ARG, "codegen: GPU arch %d", arch);
    const char *hn[64], *ht[64];
    const int nh = cg_n_headers;
    if (nh > 64) return sb_fail(SB_ERR_INTERNAL, "codegen: %d embedded headers (at most 64)", nh);
    for (int i = 0; i < nh; i++) hn[i] = cg_headers[i].name, ht[i] = cg_headers[i].text;
    /* sm_XX when this NVRTC knows the arch; else PTX for the newest compute_XX it knows (the driver
     * JIT-compiles it for the GPU) */
    int use = arch;
    const int best = best_arch(arch);
    bool ptx = false;
    if (best && best != arch) use = best, ptx = true;
    if (arch >= 90 && use < 90) /* every launch on sm_90+ uses PDL: the kernel must contain griddepcontrol.wait */
        return sb_fail(SB_ERR_UNSUPPORTED, "codegen: NVRTC %d.%d compiles for compute_%d at most; sm_%d needs compute_90+ (programmatic launch)",
                       nv.version / 1000, nv.version % 1000 / 10, use, arch);
    char opt0[64];
    snprintf(opt0, sizeof opt0, "--gpu-architecture=%s_%d", ptx ? "compute" : "sm", use);
    const char *opts[] = {opt0, "-default-device", "--std=c++17", "-DSB_NVRTC=1"};
    nvrtcProgram p = NULL;
    nvrtcResult r = nv.CreateProgram(&p, src, name, nh, ht, hn);
    if (r != 0) return sb_fail(SB_ERR_DEVICE, "codegen: nvrtcCreateProgram(%s): %s", name, nv.GetErrorString(r));
    r = nv.CompileProgram(p, (int)(sizeof opts / sizeof opts[0]), opts);
    if (r != 0) {
        char lg[2048];
        log_head(p, lg, sizeof lg);
        nv.DestroyProgram(&p);
        return sb_fail(SB_ERR_DEVICE, "codegen: NVRTC %d.%d compiling %s for %s: %s: %s", nv.version / 1000, nv.version % 1000 / 10, name, opt0,
                       nv.GetErrorString(r), lg);
    }
    size_t sz = 0;
    if (!ptx && nv.GetCUBINSize && nv.GetCUBINSize(p, &sz) == 0 && sz > 0) {
        *bin = (uint8_t *)malloc(sz);
        if (*bin && nv.GetCUBIN(p, (char *)*bin) != 0) {
            free(*bin);
            *bin = NULL;
            sz = 0;
        }
    } else {
        sz = 0;
    }
    if (!*bin) { /* PTX (NUL included: the loader takes it as a string) */
        if (nv.GetPTXSize(p, &sz) != 0 || sz == 0) {
            nv.DestroyProgram(&p);
            return sb_fail(SB_ERR_DEVICE, "codegen: NVRTC produced neither cubin nor PTX for %s", name);
        }
        *bin = (uint8_t *)malloc(sz);
        if (*bin && nv.GetPTX(p, (char *)*bin) != 0) {
            free(*bin);
            nv.DestroyProgram(&p);
            *bin = NULL;
            return sb_fail(SB_ERR_DEVICE, "codegen: nvrtcGetPTX(%s) failed", name);
        }
        *is_ptx = true;
    }
    nv.DestroyProgram(&p);
    if (!*bin) return sb_fail(SB_ERR_OOM, "codegen: %zu bytes of compiled %s", sz, name);
    *n = sz;
    return SB_OK;
}
