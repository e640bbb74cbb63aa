/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_gathered_pages.c — tables the graph only gathers rows of (gemma4's per-layer
 * embeddings, PLE: vocab x n_layer x P values, 1.9 GB of E2B's 3.4 GB) are never read whole on the
 * CPU. The model marks them (rt_model.gathered, gather_bytes; sb_model_info.weight_bytes leaves
 * them out), the load prefetch skips them, and the process's page table proves what was touched
 * (/proc/self/pagemap): after loading test-gemma4-f32.gguf with a progress callback (so every other
 * tensor is read in full) no page of its PLE table is mapped, and after three tokens only the pages
 * of their rows' 64 KiB fault-around windows are (see WINDOW), never the table.
 * Also: an untied token_embd (test-llama) is gathered, a tied one (gemma4: the output matmul reads
 * it) is not. Without a readable pagemap the page check says SKIP and the flag checks still run.
 * Skips (77) without the shared test models. bench/NOTES.md has the same count on a 3.4 GB E2B file.
 */
#define _DEFAULT_SOURCE /* mincore, posix_fadvise */
#include "runtime/model.h"
#include "runtime/session.h"
#include "test.h"
#include "tmp_dir.h"

#include <stdint.h>

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int progress(void *user, uint64_t done, uint64_t total, const char *what) {
    (void)user, (void)done, (void)total, (void)what;
    return 0;
}

/* How many pages of [a, e) (page-aligned addresses of this process) are mapped in its page table
 * (/proc/self/pagemap bit 63): a page of a file mapping is there only after an access to it (or to a
 * page next to it: the kernel maps cached pages around a fault, within the same mapping). -1 when
 * pagemap cannot be read. */
static int64_t present(uintptr_t a, uintptr_t e) {
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0) return -1;
    int64_t n = 0;
    for (uintptr_t p = a; p < e && n >= 0; p += pg) {
        uint64_t ent;
        if (pread(fd, &ent, sizeof ent, (off_t)(p / pg * sizeof ent)) != (ssize_t)sizeof ent) n = -1;
        else n += (int64_t)(ent >> 63);
    }
    close(fd);
    return n;
}

/* The kernel maps the cached pages around a faulting one: the aligned 64 KiB window holding it
 * (fault_around_bytes' default), within one mapping. The loader splits the table into its own
 * mapping (madvise) only after the header and 1-D weights were read, so the windows of those
 * reads may reach into the table's first and last 64 KiB: only pages past them are counted. */
#define WINDOW (64 * 1024)

static void ple_pages(const char *path) {
    rt_model *m = NULL;
    rt_model_params mp = {.progress = progress};
    CHECK(rt_model_load(path, &mp, &m) == SB_OK); /* with progress: every tensor but the gathered ones is read */
    if (!m) return;
    const gguf_tensor *ple = gguf_find_tensor(&m->file, "per_layer_token_embd.weight");
    const gguf_tensor *emb = gguf_find_tensor(&m->file, "token_embd.weight");
    const gguf_tensor *w = gguf_find_tensor(&m->file, "blk.0.ffn_up.weight");
    CHECK(ple && emb && w);
    CHECK(m->gathered[ple - m->file.tensors] == 1 && m->gathered[emb - m->file.tensors] == 0); /* tied: the output matmul reads it */
    CHECK(m->gather_bytes == ple->nbytes && rt_model_step_bytes(m) == m->weight_bytes - ple->nbytes);
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), t0 = (uintptr_t)ple->data, t1 = t0 + ple->nbytes;
    const uintptr_t a = (t0 + WINDOW) / WINDOW * WINDOW, e = (t1 - WINDOW) / WINDOW * WINDOW; /* the table's inner windows */
    const int64_t n_pages = (int64_t)((e - a) / pg);
    const int64_t w_present = present(((uintptr_t)w->data + pg - 1) / pg * pg, ((uintptr_t)w->data + w->nbytes) / pg * pg);
    const int64_t after_load = present(a, e);
    if (w_present <= 0 || after_load < 0 || n_pages < 64) {
        printf("SKIP page check: /proc/self/pagemap shows no page of a loaded weight (%lld) or the table is small (%lld pages)\n",
               (long long)w_present, (long long)n_pages);
        rt_model_free(m);
        return;
    }
    CHECKF(after_load == 0, "after load: %lld of %lld PLE pages mapped (the load read the table)", (long long)after_load,
           (long long)n_pages);
    rt_session *s;
    rt_session_params sp = {.n_ctx = 16, .n_threads = 2};
    CHECK(rt_session_create(m, &sp, &s) == SB_OK);
    const int32_t toks[3] = {200, 300, 310}; /* rows inside the inner windows */
    CHECK(rt_session_eval(s, toks, 3, false, NULL) == SB_OK);
    const uint64_t row = ple->nbytes / (uint64_t)ple->ne[1];
    int64_t mapped = 0, stray = 0, rows_mapped = 0;
    for (uintptr_t p = a; p < e; p += pg) {
        if (present(p, p + pg) != 1) continue;
        mapped++;
        int near = 0, holds = 0;
        for (int k = 0; k < 3; k++) {
            const uintptr_t r0 = t0 + (uintptr_t)toks[k] * row, r1 = r0 + row;
            near |= p / WINDOW == r0 / WINDOW || p / WINDOW == (r1 - 1) / WINDOW;
            holds |= p + pg > r0 && p < r1;
        }
        stray += !near;
        rows_mapped += holds;
    }
    CHECKF(stray == 0 && rows_mapped >= 2 && mapped <= 3 * WINDOW / (int64_t)pg,
           "after 3 tokens: %lld of the table's %lld inner pages mapped, %lld outside their rows' windows, %lld holding their rows",
           (long long)mapped, (long long)n_pages, (long long)stray, (long long)rows_mapped);
    printf("PLE table: %lld inner pages; mapped after load %lld, after 3 tokens %lld (all in their rows' 64 KiB windows)\n",
           (long long)n_pages, (long long)after_load, (long long)mapped);
    rt_session_free(s);
    rt_model_free(m);
}

int main(void) {
    char g4[8192], ll[8192];
    int ran = shared_file("models/test-gemma4-f32.gguf", g4, "gemma4 PLE pages");
    if (ran) ple_pages(g4);
    if (shared_file("models/test-llama-f32.gguf", ll, "untied token_embd")) {
        rt_model *m = NULL;
        CHECK(rt_model_load(ll, NULL, &m) == SB_OK);
        const gguf_tensor *emb = m ? gguf_find_tensor(&m->file, "token_embd.weight") : NULL;
        CHECK(emb && m->gathered[emb - m->file.tensors] == 1 && m->gather_bytes == emb->nbytes);
        rt_model_free(m);
    }
    return test_summary_or_skip(ran);
}
