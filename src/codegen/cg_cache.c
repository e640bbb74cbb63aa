/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * codegen/cg_cache.c — compiled kernels and autotune winners, in memory and on disk, plus the
 * codegen statistics (`sb run -v`).
 * Layer 3 (codegen). One process-wide mutex guards the tables and stats; NVRTC compiles run
 * outside it (two threads may compile the same source once each; the second insert is dropped).
 * Key: two 64-bit FNV-1a variants over source, NVRTC options, GPU arch, NVRTC version,
 * SB_VERSION_STRING and the hash of the embedded headers (cg_headers) — any change recompiles.
 * Disk ($XDG_CACHE_HOME/sonicboom, else $HOME/.cache/sonicboom): <key>.cubin = magic "SBCGBIN1",
 * u64 key[2], u32 is_ptx, u32 0, u64 size, u64 FNV of the payload, payload; <key>.tune = magic
 * "SBCGTUN1", u64 key[2], i32 variant, i32 ~variant. Written by base/file_io's output rule (temp file,
 * fsync, rename) and read only from regular files;
 * a file whose magic/key/size/hash does not match is ignored (recompiled and rewritten), an
 * unwritable folder only costs the disk cache (counted in disk_errors). Never trusted, never fatal.
 * SB_CODEGEN_DUMP=DIR: every source seen first is written to DIR/<kernel>.cu with DIR/<kernel>.key
 * (key, arch, options, versions).
 * Non-goals: eviction, locking between processes (rename makes concurrent writers safe).
 */
#include "codegen/cg.h"

#include "base/file_io.h"
#include "base/hash.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

// ---- state ----

typedef struct bin_entry {
    cg_key key;
    uint8_t *data;
    size_t size;
    bool is_ptx;
} bin_entry;

typedef struct tune_entry {
    cg_key key;
    int variant;
} tune_entry;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static bin_entry *bins;
static int32_t n_bins, cap_bins;
static tune_entry *tunes;
static int32_t n_tunes, cap_tunes;
static cg_stats stats;
/* binaries dropped by cg_cache_forget_memory stay allocated (handed-out pointers stay valid) */
static bin_entry *old_bins;
static int32_t n_old, cap_old;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

// ---- keys ----

uint64_t cg_headers_hash(void) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < cg_n_headers; i++) {
        h ^= sb_hash_bytes(cg_headers[i].name, strlen(cg_headers[i].name));
        h *= 1099511628211ull;
        h ^= sb_hash_bytes(cg_headers[i].text, strlen(cg_headers[i].text));
        h *= 1099511628211ull;
    }
    return h;
}

typedef struct hasher {
    uint64_t a, b;
} hasher;
static void hs_init(hasher *h) {
    h->a = 1469598103934665603ull;
    h->b = 0x9e3779b97f4a7c15ull;
}
static void hs_bytes(hasher *h, const void *p, size_t n) {
    const unsigned char *s = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++) {
        h->a = (h->a ^ s[i]) * 1099511628211ull;
        h->b = (h->b ^ s[i]) * 0x100000001b3ull;
        h->b ^= h->b >> 29;
    }
    const unsigned char sep = 0xff; /* parts are separated, so ("ab","c") != ("a","bc") */
    h->a = (h->a ^ sep) * 1099511628211ull;
    h->b = ((h->b ^ sep) * 0x100000001b3ull) ^ (h->b >> 31);
}
static void hs_str(hasher *h, const char *s) { hs_bytes(h, s, s ? strlen(s) : 0); }
static void hs_i64(hasher *h, int64_t v) { hs_bytes(h, &v, sizeof v); }
static cg_key hs_end(hasher *h) {
    uint64_t b = h->b;
    b ^= b >> 33;
    b *= 0xff51afd7ed558ccdull;
    b ^= b >> 33;
    return (cg_key){{h->a, b}};
}

cg_key cg_key_make(const char *src, const char *opts, int arch, int nvrtc_version, const char *sb_version) {
    hasher h;
    hs_init(&h);
    hs_str(&h, "bin");
    hs_str(&h, src);
    hs_str(&h, opts);
    hs_i64(&h, arch);
    hs_i64(&h, nvrtc_version);
    hs_str(&h, sb_version);
    hs_i64(&h, (int64_t)cg_headers_hash());
    return hs_end(&h);
}

void cg_key_hex(cg_key k, char out[33]) { snprintf(out, 33, "%016llx%016llx", (unsigned long long)k.h[0], (unsigned long long)k.h[1]); }

static bool key_eq(cg_key a, cg_key b) { return a.h[0] == b.h[0] && a.h[1] == b.h[1]; }

// ---- disk ----

const char *cg_cache_dir(char *buf, size_t cap) {
    const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    if (x && *x) snprintf(buf, cap, "%s/sonicboom", x);
    else if (h && *h) snprintf(buf, cap, "%s/.cache/sonicboom", h);
    else if (cap) buf[0] = 0;
    return buf;
}

/* mkdir -p of dir (only the last two levels may be missing: $XDG_CACHE_HOME and sonicboom) */
static bool ensure_dir(const char *dir) {
    struct stat st;
    if (stat(dir, &st) == 0) return S_ISDIR(st.st_mode);
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", dir);
    char *sl = strrchr(parent, '/');
    if (sl && sl != parent) {
        *sl = 0;
        if (stat(parent, &st) != 0 && mkdir(parent, 0755) != 0 && errno != EEXIST) return false;
    }
    return mkdir(dir, 0755) == 0 || errno == EEXIST;
}

static void path_of(char *out, size_t cap, const char *dir, cg_key k, const char *ext) {
    char hex[33];
    cg_key_hex(k, hex);
    snprintf(out, cap, "%s/%s.%s", dir, hex, ext);
}

/* write header + payload by the library's output rule (base/file_io.h: O_EXCL temp file beside it,
 * fsync, rename; never over a directory or device); false on any failure (nothing left behind) */
static bool write_atomic(const char *dir, const char *path, const void *hdr, size_t hn, const void *pay, size_t pn) {
    if (!ensure_dir(dir)) return false;
    fio_out o;
    if (fio_out_open(path, &o) != SB_OK) return false;
    if (fio_out_write(&o, hdr, hn) != SB_OK || (pn && fio_out_write(&o, pay, pn) != SB_OK)) {
        fio_out_abort(&o);
        return false;
    }
    return fio_out_commit(&o) == SB_OK;
}

/* fopen(path, "rb") of a regular file only: a FIFO or device planted in the cache is not waited on */
static FILE *open_regular(const char *path) {
    int fd;
    struct stat st;
    if (fio_open_regular(path, &fd, &st) != SB_OK) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) close(fd);
    return f;
}

typedef struct bin_hdr {
    char magic[8];
    uint64_t key[2];
    uint32_t is_ptx, zero;
    uint64_t size, hash;
} bin_hdr;

/* a verified binary from disk, or NULL (absent: *bad = false; present but wrong: *bad = true) */
static uint8_t *disk_load(const char *dir, cg_key k, size_t *size, bool *is_ptx, bool *bad) {
    *bad = false;
    if (!dir[0]) return NULL;
    char path[4200];
    path_of(path, sizeof path, dir, k, "cubin");
    FILE *f = open_regular(path);
    if (!f) return NULL;
    bin_hdr h;
    uint8_t *p = NULL;
    *bad = true;
    if (fread(&h, 1, sizeof h, f) == sizeof h && !memcmp(h.magic, "SBCGBIN1", 8) && h.key[0] == k.h[0] && h.key[1] == k.h[1] && h.zero == 0 &&
        h.is_ptx <= 1 && h.size > 0 && h.size < ((uint64_t)1 << 30)) {
        p = (uint8_t *)malloc((size_t)h.size);
        int extra;
        if (p && fread(p, 1, (size_t)h.size, f) == h.size && (extra = fgetc(f)) == EOF && sb_hash_bytes(p, (size_t)h.size) == h.hash) {
            *size = (size_t)h.size;
            *is_ptx = h.is_ptx != 0;
            *bad = false;
        } else {
            free(p);
            p = NULL;
        }
    }
    fclose(f);
    return p;
}

static bool disk_store(const char *dir, cg_key k, const uint8_t *data, size_t size, bool is_ptx) {
    if (!dir[0]) return true; /* no cache folder at all: nothing to do, not an error */
    bin_hdr h = {.magic = {'S', 'B', 'C', 'G', 'B', 'I', 'N', '1'}, .key = {k.h[0], k.h[1]}, .is_ptx = is_ptx, .size = size,
                 .hash = sb_hash_bytes(data, size)};
    char path[4200];
    path_of(path, sizeof path, dir, k, "cubin");
    return write_atomic(dir, path, &h, sizeof h, data, size);
}

static void dump_source(const char *src, const char *name, cg_key k, const char *opts, int arch) {
    const char *dir = getenv("SB_CODEGEN_DUMP");
    if (!dir || !*dir) return;
    char path[4200], hex[33];
    cg_key_hex(k, hex);
    if (!ensure_dir(dir)) {
        stats.disk_errors++;
        return;
    }
    snprintf(path, sizeof path, "%s/%s.cu", dir, name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(src, f);
        fclose(f);
    } else {
        stats.disk_errors++;
    }
    snprintf(path, sizeof path, "%s/%s.key", dir, name);
    f = fopen(path, "wb");
    if (f) {
        fprintf(f, "key %s\narch sm_%d\noptions %s\nnvrtc %d\nsonicboom %s\nheaders %016llx\n", hex, arch, opts, cg_nvrtc_version(),
                SB_VERSION_STRING, (unsigned long long)cg_headers_hash());
        fclose(f);
    } else {
        stats.disk_errors++;
    }
}

// ---- binaries ----

static bin_entry *mem_find(cg_key k) {
    for (int32_t i = 0; i < n_bins; i++)
        if (key_eq(bins[i].key, k)) return &bins[i];
    return NULL;
}

/* takes ownership of data; returns the entry (an existing one if another thread won) or NULL on OOM */
static bin_entry *mem_insert(cg_key k, uint8_t *data, size_t size, bool is_ptx) {
    bin_entry *e = mem_find(k);
    if (e) {
        free(data);
        return e;
    }
    if (n_bins == cap_bins) {
        int32_t nc = cap_bins ? 2 * cap_bins : 64;
        bin_entry *nb = (bin_entry *)realloc(bins, (size_t)nc * sizeof *nb);
        if (!nb) {
            free(data);
            return NULL;
        }
        bins = nb;
        cap_bins = nc;
    }
    bins[n_bins] = (bin_entry){k, data, size, is_ptx};
    return &bins[n_bins++];
}

static sb_status hand_out(bin_entry *e, cg_binary *out) {
    if (!e) return sb_fail(SB_ERR_OOM, "codegen: memory cache");
    *out = (cg_binary){e->data, e->size, e->is_ptx, e->key};
    return SB_OK;
}

sb_status cg_get_binary(const char *src, const char *name, int arch, cg_binary *out) {
    memset(out, 0, sizeof *out);
    const sb_status ld = cg_nvrtc_load(); /* its version is part of the key; a disk hit still needs none to compile */
    char opts[256];
    cg_nvrtc_options(arch, opts, sizeof opts);
    const cg_key k = cg_key_make(src, opts, arch, cg_nvrtc_version(), SB_VERSION_STRING);
    char dir[4096];
    cg_cache_dir(dir, sizeof dir);
    pthread_mutex_lock(&mu);
    bin_entry *e = mem_find(k);
    if (e) {
        stats.memory++;
        sb_status s = hand_out(e, out);
        pthread_mutex_unlock(&mu);
        return s;
    }
    dump_source(src, name, k, opts, arch);
    pthread_mutex_unlock(&mu);
    if (ld != SB_OK) return ld; /* without NVRTC the runtime uses the hand-written kernels (disk entries need a version to match) */

    double t0 = now_ms();
    size_t size = 0;
    bool is_ptx = false, bad = false;
    uint8_t *data = disk_load(dir, k, &size, &is_ptx, &bad);
    if (data) {
        double ms = now_ms() - t0;
        pthread_mutex_lock(&mu);
        stats.disk++;
        stats.kernels++;
        stats.disk_ms += ms;
        sb_status s = hand_out(mem_insert(k, data, size, is_ptx), out);
        pthread_mutex_unlock(&mu);
        return s;
    }
    t0 = now_ms();
    sb_status st = cg_nvrtc_compile(src, name, arch, &data, &size, &is_ptx);
    double ms = now_ms() - t0;
    if (st != SB_OK) return st;
    const bool stored = disk_store(dir, k, data, size, is_ptx);
    pthread_mutex_lock(&mu);
    stats.compiled++;
    stats.kernels++;
    stats.compile_ms += ms;
    stats.disk_errors += bad + !stored;
    sb_status s = hand_out(mem_insert(k, data, size, is_ptx), out);
    pthread_mutex_unlock(&mu);
    return s;
}

// ---- parallel compiles ----

typedef struct par_job {
    const char *const *src, *const *name;
    int n, arch, next;
    cg_binary *out;
    sb_status *st;
    char **msg;
} par_job;

static void *par_worker(void *arg) {
    par_job *j = (par_job *)arg;
    for (;;) {
        const int i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        if (i >= j->n) return NULL;
        j->st[i] = cg_get_binary(j->src[i], j->name[i], j->arch, &j->out[i]);
        if (j->st[i] != SB_OK) j->msg[i] = strdup(sb_last_error()); /* the error text is per thread */
    }
}

sb_status cg_get_binaries(const char *const *src, const char *const *name, int n, int arch, int threads, cg_binary *out, sb_status *st) {
    if (n <= 0) return SB_OK;
    if (threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        threads = c > 0 ? (int)c : 1;
    }
    if (threads > 16) threads = 16;
    if (threads > n) threads = n;
    char **msg = (char **)calloc((size_t)n, sizeof *msg);
    if (!msg) return sb_fail(SB_ERR_OOM, "codegen: %d compile jobs", n);
    par_job j = {.src = src, .name = name, .n = n, .arch = arch, .out = out, .st = st, .msg = msg};
    pthread_t th[16];
    int started = 0;
    for (int t = 1; t < threads; t++) /* this thread is worker 0 */
        if (pthread_create(&th[started], NULL, par_worker, &j) == 0) started++;
    par_worker(&j);
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    sb_status first = SB_OK;
    for (int i = 0; i < n; i++) {
        if (st[i] != SB_OK && first == SB_OK) first = sb_fail(st[i], "%s", msg[i] ? msg[i] : "codegen: compile failed");
        free(msg[i]);
    }
    free(msg);
    return first;
}

void cg_cache_forget_memory(void) {
    pthread_mutex_lock(&mu);
    for (int32_t i = 0; i < n_bins; i++) {
        if (n_old == cap_old) {
            int32_t nc = cap_old ? 2 * cap_old : 64;
            bin_entry *nb = (bin_entry *)realloc(old_bins, (size_t)nc * sizeof *nb);
            if (!nb) break; /* keep the rest in the table rather than lose them */
            old_bins = nb;
            cap_old = nc;
        }
        old_bins[n_old++] = bins[i];
        bins[i].data = NULL;
    }
    int32_t keep = 0;
    for (int32_t i = 0; i < n_bins; i++)
        if (bins[i].data) bins[keep++] = bins[i];
    n_bins = keep;
    n_tunes = 0;
    pthread_mutex_unlock(&mu);
}

// ---- autotune winners ----

static cg_key tune_key(const cg_group *g, const char *tag) {
    hasher h;
    hs_init(&h);
    hs_str(&h, "tune");
    hs_i64(&h, g->kind);
    hs_i64(&h, g->E);
    int64_t bucket = 1; /* winners per power-of-two row count: prefill lengths share them */
    while (bucket < g->rows && bucket < ((int64_t)1 << 40)) bucket *= 2;
    hs_i64(&h, bucket);
    hs_i64(&h, g->xq);
    hs_bytes(&h, &g->eps, sizeof g->eps);
    hs_i64(&h, g->has_w);
    hs_i64(&h, g->gelu);
    hs_i64(&h, g->n_steps);
    for (int k = 0; g->kind == CG_EW && k < g->n_steps; k++) {
        hs_i64(&h, g->st[k].op);
        hs_i64(&h, g->st[k].slot);
        hs_i64(&h, g->st[k].bcast);
        hs_bytes(&h, &g->st[k].f, sizeof g->st[k].f);
    }
    cg_variant v[CG_MAX_VARIANTS]; /* a winner is an index into this list */
    const int nv = cg_variants(g, v);
    for (int k = 0; k < nv; k++) hs_i64(&h, v[k].threads | (int64_t)v[k].rpb << 16 | (int64_t)v[k].reg << 32);
    hs_str(&h, tag);
    hs_i64(&h, cg_nvrtc_version());
    hs_str(&h, SB_VERSION_STRING);
    hs_i64(&h, (int64_t)cg_headers_hash());
    return hs_end(&h);
}

typedef struct tune_rec {
    char magic[8];
    uint64_t key[2];
    int32_t variant, check;
} tune_rec;

int cg_tune_get(const cg_group *grp, const char *device_tag) {
    const cg_key k = tune_key(grp, device_tag);
    pthread_mutex_lock(&mu);
    for (int32_t i = 0; i < n_tunes; i++)
        if (key_eq(tunes[i].key, k)) {
            int v = tunes[i].variant;
            pthread_mutex_unlock(&mu);
            return v;
        }
    pthread_mutex_unlock(&mu);
    char dir[4096], path[4200];
    cg_cache_dir(dir, sizeof dir);
    if (!dir[0]) return -1;
    path_of(path, sizeof path, dir, k, "tune");
    FILE *f = open_regular(path);
    if (!f) return -1;
    tune_rec r;
    int v = -1;
    if (fread(&r, 1, sizeof r, f) == sizeof r && fgetc(f) == EOF && !memcmp(r.magic, "SBCGTUN1", 8) && r.key[0] == k.h[0] && r.key[1] == k.h[1] &&
        r.check == ~r.variant && r.variant >= 0 && r.variant <= CG_TUNE_HAND)
        v = r.variant;
    fclose(f);
    pthread_mutex_lock(&mu);
    if (v < 0) stats.disk_errors++;
    else if (n_tunes < cap_tunes || (tunes = (tune_entry *)realloc(tunes, (size_t)(cap_tunes = cap_tunes ? 2 * cap_tunes : 64) * sizeof *tunes)))
        tunes[n_tunes++] = (tune_entry){k, v};
    else
        n_tunes = cap_tunes = 0;
    pthread_mutex_unlock(&mu);
    return v;
}

void cg_tune_put(const cg_group *grp, const char *device_tag, int variant) {
    if (variant < 0 || variant > CG_TUNE_HAND) return;
    const cg_key k = tune_key(grp, device_tag);
    pthread_mutex_lock(&mu);
    bool found = false;
    for (int32_t i = 0; i < n_tunes; i++)
        if (key_eq(tunes[i].key, k)) tunes[i].variant = variant, found = true;
    if (!found) {
        if (n_tunes < cap_tunes || (tunes = (tune_entry *)realloc(tunes, (size_t)(cap_tunes = cap_tunes ? 2 * cap_tunes : 64) * sizeof *tunes)))
            tunes[n_tunes++] = (tune_entry){k, variant};
        else
            n_tunes = cap_tunes = 0;
    }
    pthread_mutex_unlock(&mu);
    char dir[4096], path[4200];
    cg_cache_dir(dir, sizeof dir);
    if (!dir[0]) return;
    path_of(path, sizeof path, dir, k, "tune");
    tune_rec r = {.magic = {'S', 'B', 'C', 'G', 'T', 'U', 'N', '1'}, .key = {k.h[0], k.h[1]}, .variant = variant, .check = ~variant};
    if (!write_atomic(dir, path, &r, sizeof r, NULL, 0)) {
        pthread_mutex_lock(&mu);
        stats.disk_errors++;
        pthread_mutex_unlock(&mu);
    }
}

// ---- stats ----

cg_stats cg_get_stats(void) {
    pthread_mutex_lock(&mu);
    cg_stats s = stats;
    pthread_mutex_unlock(&mu);
    return s;
}

void cg_reset_stats(void) {
    pthread_mutex_lock(&mu);
    memset(&stats, 0, sizeof stats);
    pthread_mutex_unlock(&mu);
}

void cg_count_tune(bool tuned, bool hand) {
    pthread_mutex_lock(&mu);
    if (tuned) stats.tuned++;
    else stats.tune_hits++;
    stats.hand_kept += hand;
    pthread_mutex_unlock(&mu);
}

size_t cg_stats_line(char *buf, size_t cap) {
    cg_stats s = cg_get_stats();
    int k = snprintf(buf, cap,
                     "codegen: %lld kernels, %lld compiled (%.0f ms), %lld from disk cache (%.0f ms), %lld memory hits, %lld groups autotuned, "
                     "%lld winners cached",
                     (long long)s.kernels, (long long)s.compiled, s.compile_ms, (long long)s.disk, s.disk_ms, (long long)s.memory,
                     (long long)s.tuned, (long long)s.tune_hits);
    if (k > 0 && s.hand_kept && (size_t)k < cap)
        k += snprintf(buf + k, cap - (size_t)k, ", %lld kept the hand-written kernel (faster)", (long long)s.hand_kept);
    if (k > 0 && s.disk_errors && (size_t)k < cap)
        k += snprintf(buf + k, cap - (size_t)k, ", %lld cache files rewritten or unwritable", (long long)s.disk_errors);
    return k > 0 ? (size_t)k : 0;
}
