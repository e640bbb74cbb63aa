/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/api/test_tensor_device.c — the tensor API's device rules on any machine: a stand-in device
 * backend (installed as the shared CUDA backend, api_dev_install) that behaves as the CUDA executor
 * does with memory — it keeps its own copy of every weight and cache it is bound to, keyed by host
 * address, uploaded on first sight and never again, and writes caches only in that copy — but
 * computes with the CPU kernels. Every scenario of device_lib.h must then agree exactly with the
 * CPU, which holds only if the API downloads, refreshes and drops those copies at the right times
 * and sends run-time inputs each run. Also: the backend calls themselves (a copy dropped when its
 * memory is freed, none kept for run-time inputs, none downloaded when nothing is newer).
 */
#include "test.h"

#include "sonicboom.h"
#include "api/api_tensor.h"
#include "api/tensor_lib.h"
#include "api/device_lib.h"
#include "graph/plan.h"
#include "runtime/backends.h"

#define MAX_COPIES 256

typedef struct copy {
    const void *host;
    void *mem;
    uint64_t bytes;
} copy;

/* the stand-in: a CPU backend computing over copies */
typedef struct fake {
    backend base;
    backend *cpu;
    copy c[MAX_COPIES];
    int n;
    int uploads, downloads, refreshes, drops;
    int host_allocs, host_frees;      /* page-locked memory (host_alloc): calls */
    void *pinned[MAX_COPIES];         /* what host_alloc handed out and host_free has not taken back */
    int n_pinned;
    bool host_alloc_fails;            /* host_alloc answers SB_ERR_OOM */
} fake;

static fake *fk(const backend *be) { return (fake *)be; }

static copy *find(fake *f, const void *host) {
    for (int i = 0; i < f->n; i++)
        if (f->c[i].host == host) return &f->c[i];
    return NULL;
}

static void fk_target(const backend *be, plan_target *t) { fk(be)->cpu->ops->target(fk(be)->cpu, t); }
static sb_status fk_prepare(backend *be, const plan *p) { return fk(be)->cpu->ops->prepare(fk(be)->cpu, p); }
static void fk_forget(backend *be, const plan *p) { fk(be)->cpu->ops->forget(fk(be)->cpu, p); }
static backend_stats fk_stats(const backend *be) { return fk(be)->cpu->ops->stats(fk(be)->cpu); }

/* as the CUDA executor binds: weights (not per-run) and caches from the copies, the rest from the host */
static sb_status fk_run(backend *be, const plan *p, void *const *data, int32_t n_data, float *const *out) {
    fake *f = fk(be);
    void *sub[64];
    if (n_data > 64) return sb_fail(SB_ERR_INTERNAL, "fake: %d inputs", (int)n_data);
    for (int32_t i = 0; i < n_data; i++) {
        const plan_input *in = &p->inputs[i];
        sub[i] = data[i];
        if (!((in->kind == IR_OP_WEIGHT && !in->per_run) || in->kind == IR_OP_KV) || !data[i]) continue;
        copy *c = find(f, data[i]);
        if (!c) {
            if (f->n == MAX_COPIES) return sb_fail(SB_ERR_OOM, "fake: copies");
            const uint64_t nb = ir_nbytes(&p->g->nodes[in->node]);
            c = &f->c[f->n++];
            *c = (copy){data[i], malloc((size_t)nb), nb};
            memcpy(c->mem, data[i], (size_t)nb);
            f->uploads++;
        }
        sub[i] = c->mem;
    }
    return f->cpu->ops->run(f->cpu, p, sub, n_data, out);
}

static sb_status fk_download(backend *be, void *host, uint64_t bytes) {
    copy *c = find(fk(be), host);
    if (c) memcpy(host, c->mem, (size_t)(bytes < c->bytes ? bytes : c->bytes)), fk(be)->downloads++;
    return SB_OK;
}

static sb_status fk_refresh(backend *be, const void *host, uint64_t bytes) {
    copy *c = find(fk(be), host);
    if (c) memcpy(c->mem, host, (size_t)(bytes < c->bytes ? bytes : c->bytes)), fk(be)->refreshes++;
    return SB_OK;
}

static void fk_drop(backend *be, const void *host) {
    fake *f = fk(be);
    copy *c = find(f, host);
    if (!c) return;
    free(c->mem);
    *c = f->c[--f->n];
    f->drops++;
}

/* "page-locked" memory: poisoned (NaN bytes), so an output nobody wrote reads as NaN */
static sb_status fk_host_alloc(backend *be, size_t bytes, void **out) {
    fake *f = fk(be);
    if (f->host_alloc_fails) return sb_fail(SB_ERR_OOM, "fake: page-locked memory of %zu bytes", bytes);
    if (f->n_pinned == MAX_COPIES || !(*out = malloc(bytes ? bytes : 1))) return sb_fail(SB_ERR_OOM, "fake: page-locked memory");
    memset(*out, 0xFF, bytes);
    f->pinned[f->n_pinned++] = *out;
    f->host_allocs++;
    return SB_OK;
}

static bool fk_is_pinned(const fake *f, const void *p) {
    for (int i = 0; i < f->n_pinned; i++)
        if (f->pinned[i] == p) return true;
    return false;
}

static void fk_host_free(backend *be, void *p) {
    fake *f = fk(be);
    for (int i = 0; i < f->n_pinned; i++)
        if (f->pinned[i] == p) {
            f->pinned[i] = f->pinned[--f->n_pinned];
            f->host_frees++;
            free(p);
            return;
        }
    CHECKF(false, "fake: host_free of %p, which host_alloc did not hand out", p);
}

static void fk_free(backend *be) { (void)be; }

static const backend_ops fake_ops = {
    .name = "fake-cuda", .target = fk_target, .prepare = fk_prepare, .run = fk_run, .forget = fk_forget, .stats = fk_stats,
    .download = fk_download, .refresh = fk_refresh, .drop = fk_drop, .host_alloc = fk_host_alloc, .host_free = fk_host_free,
    .free = fk_free,
};

static fake dev_fake = {.base = {.ops = &fake_ops}};

/* the backend calls: copies follow tensors' lives, run-time inputs get none, downloads only when newer */
static void test_calls(void) {
    const int64_t N = 32;
    sb_tensor *a = dl_f32(SB_DEVICE_CUDA, N, 1, NULL), *o = NULL;
    sb_tensor_info info;
    CHECK(sb_tensor_get_info(a, &info) == SB_OK && info.device == SB_DEVICE_CUDA);
    const int n0 = dev_fake.n, up0 = dev_fake.uploads;
    CHECK(sb_tensor_op("scale", &a, 1, (const double[1]){3}, 1, &o) == SB_OK && dl_device_of(o) == SB_DEVICE_CUDA);
    CHECK(dev_fake.n == n0 + 1 && dev_fake.uploads == up0 + 1); /* a's copy */
    sb_tensor *o2 = NULL;
    CHECK(sb_tensor_op("scale", &a, 1, (const double[1]){3}, 1, &o2) == SB_OK);
    CHECK(dev_fake.uploads == up0 + 1 && dl_diff(o, o2) == 0); /* uploaded once */
    const void *a_mem = dev_fake.c[dev_fake.n - 1].host;
    const int drops0 = dev_fake.drops, dl0 = dev_fake.downloads;
    float *v = rd(a, NULL); /* nothing newer on the device: no download */
    CHECK(dev_fake.downloads == dl0);
    free(v);
    sb_tensor_free(a);
    CHECK(dev_fake.drops == drops0 + 1 && dev_fake.n == n0 && !find(&dev_fake, a_mem));
    /* a view keeps the memory (and its copy) alive */
    sb_tensor *b = dl_f32(SB_DEVICE_CUDA, N, 1, NULL), *bv = NULL, *ob = NULL;
    CHECK(sb_tensor_op("reshape", &b, 1, (const double[2]){8, 4}, 2, &bv) == SB_OK && dl_device_of(bv) == SB_DEVICE_CUDA);
    CHECK(sb_tensor_op("silu", &bv, 1, NULL, 0, &ob) == SB_OK);
    const int n1 = dev_fake.n;
    sb_tensor_free(b);
    CHECK(dev_fake.n == n1);
    sb_tensor_free(bv);
    CHECK(dev_fake.n == n1 - 1);
    /* run-time inputs of a device program: no copies, however many tensors are passed */
    sb_graph *g = NULL;
    sb_value vx, y;
    CHECK(sb_graph_create(&g) == SB_OK && sb_graph_input(g, SB_INPUT_DATA, "x", SB_TYPE_F32, 1, &N, &vx) == SB_OK);
    CHECK(sb_graph_op(g, "silu", &vx, 1, NULL, 0, &y) == SB_OK && sb_graph_output(g, y, "y") == SB_OK);
    sb_program *pr = NULL;
    const sb_compile_params cp = {.device = SB_DEVICE_CUDA};
    CHECK(sb_graph_compile(g, &cp, &pr) == SB_OK);
    sb_graph_free(g);
    const int n2 = dev_fake.n;
    for (int i = 0; i < 4; i++) {
        sb_tensor *x = dl_f32(SB_DEVICE_CUDA, N, 1, NULL), *out[1] = {NULL}, *ref = NULL;
        CHECK(sb_program_run(pr, &x, 1, out, 1) == SB_OK && out[0] && dl_device_of(out[0]) == SB_DEVICE_CUDA);
        CHECK(sb_tensor_op("silu", &x, 1, NULL, 0, &ref) == SB_OK && dl_diff(out[0], ref) == 0);
        sb_tensor_free(out[0]), sb_tensor_free(ref), sb_tensor_free(x);
    }
    CHECK(dev_fake.n == n2); /* every eager source copy went with its tensor, the program's inputs had none */
    sb_program_free(pr);
    sb_tensor_free(o), sb_tensor_free(o2), sb_tensor_free(ob);
    /* a cache a device run wrote: downloaded once on read, then current */
    const int64_t nc[2] = {4, 4};
    sb_tensor *c = NULL, *x = dl_f32(SB_DEVICE_CUDA, 4, 1, NULL), *p = dl_i32(SB_DEVICE_CUDA, 1, (const int32_t[1]){2}), *r = NULL;
    CHECK(sb_tensor_create(SB_DEVICE_CUDA, SB_TYPE_F32, 2, nc, NULL, 0, &c) == SB_OK);
    CHECK(sb_tensor_op("kv_store", (sb_tensor *[3]){c, x, p}, 3, NULL, 0, &r) == SB_OK);
    const int dl1 = dev_fake.downloads;
    float *cv = rd(r, NULL), *xv = rd(x, NULL);
    CHECK(dev_fake.downloads == dl1 + 1 && !memcmp(cv + 8, xv, 4 * sizeof *xv));
    free(cv);
    cv = rd(c, NULL);
    CHECK(dev_fake.downloads == dl1 + 1);
    free(cv), free(xv);
    sb_tensor_free(r), sb_tensor_free(c), sb_tensor_free(x), sb_tensor_free(p);
}

/* a silu program of [N] on device dev, compiled with page_locked_outputs pl */
static sb_program *silu_program(int64_t N, int dev, int pl) {
    sb_graph *g = NULL;
    sb_value vx, y;
    CHECK(sb_graph_create(&g) == SB_OK && sb_graph_input(g, SB_INPUT_DATA, "x", SB_TYPE_F32, 1, &N, &vx) == SB_OK);
    CHECK(sb_graph_op(g, "silu", &vx, 1, NULL, 0, &y) == SB_OK && sb_graph_output(g, y, "y") == SB_OK);
    sb_program *pr = NULL;
    const sb_compile_params cp = {.device = dev, .page_locked_outputs = pl};
    CHECKF(sb_graph_compile(g, &cp, &pr) == SB_OK, "compile: %s", sb_last_error());
    sb_graph_free(g);
    return pr;
}

/* run pr on a new random x into *out (NULL: a new tensor); the result against eager silu on the CPU */
static void silu_run(sb_program *pr, int64_t N, sb_tensor **out) {
    sb_tensor *x = dl_f32(SB_DEVICE_CPU, N, 1, NULL), *ref = NULL;
    CHECKF(sb_program_run(pr, &x, 1, out, 1) == SB_OK, "run: %s", sb_last_error());
    CHECK(sb_tensor_op("silu", &x, 1, NULL, 0, &ref) == SB_OK && dl_diff(*out, ref) == 0);
    sb_tensor_free(ref), sb_tensor_free(x);
}

/* page_locked_outputs: a CUDA program's new outputs in the backend's page-locked memory, written in
 * place run after run with no new allocation, given back to host_free with the tensor; not on the
 * CPU, not without the flag; an allocation failure leaves no tensor; a value outside 0/1 refused */
static void test_page_locked_outputs(void) {
    const int64_t N = 40;
    const int a0 = dev_fake.host_allocs, f0 = dev_fake.host_frees;
    sb_program *pr = silu_program(N, SB_DEVICE_CUDA, 1);
    sb_tensor *out[1] = {NULL};
    silu_run(pr, N, out);
    CHECK(dev_fake.host_allocs == a0 + 1 && fk_is_pinned(&dev_fake, out[0]->buf->data));
    CHECK(dl_device_of(out[0]) == SB_DEVICE_CUDA);
    sb_tensor *first = out[0];
    for (int i = 0; i < 3; i++) silu_run(pr, N, out); /* in place: rewritten (new x each time), nothing allocated */
    CHECK(out[0] == first && dev_fake.host_allocs == a0 + 1 && dev_fake.host_frees == f0);
    sb_tensor *other[1] = {NULL};
    silu_run(pr, N, other); /* each new output its own memory */
    CHECK(dev_fake.host_allocs == a0 + 2 && other[0]->buf->data != out[0]->buf->data);
    void *mem = out[0]->buf->data;
    sb_tensor_free(out[0]);
    CHECK(dev_fake.host_frees == f0 + 1 && !fk_is_pinned(&dev_fake, mem));
    sb_tensor_free(other[0]);
    CHECK(dev_fake.host_frees == f0 + 2);
    /* the allocation fails: the run's status, no tensor */
    dev_fake.host_alloc_fails = true;
    sb_tensor *x = dl_f32(SB_DEVICE_CPU, N, 1, NULL), *none[1] = {NULL};
    CHECK(sb_program_run(pr, &x, 1, none, 1) == SB_ERR_OOM && !none[0]);
    dev_fake.host_alloc_fails = false;
    sb_tensor_free(x);
    sb_program_free(pr);
    CHECK(dev_fake.host_allocs - a0 == dev_fake.host_frees - f0);
    /* without the flag, and on the CPU with it: ordinary memory */
    const int a1 = dev_fake.host_allocs;
    sb_program *plain = silu_program(N, SB_DEVICE_CUDA, 0), *cpu = silu_program(N, SB_DEVICE_CPU, 1);
    sb_tensor *o1[1] = {NULL}, *o2[1] = {NULL};
    silu_run(plain, N, o1);
    silu_run(cpu, N, o2);
    CHECK(dev_fake.host_allocs == a1 && !fk_is_pinned(&dev_fake, o1[0]->buf->data) && dl_device_of(o2[0]) == SB_DEVICE_CPU);
    sb_tensor_free(o1[0]), sb_tensor_free(o2[0]);
    sb_program_free(plain), sb_program_free(cpu);
    /* only 0 and 1 */
    sb_graph *g = NULL;
    sb_value vx, y;
    CHECK(sb_graph_create(&g) == SB_OK && sb_graph_input(g, SB_INPUT_DATA, "x", SB_TYPE_F32, 1, &N, &vx) == SB_OK);
    CHECK(sb_graph_op(g, "silu", &vx, 1, NULL, 0, &y) == SB_OK && sb_graph_output(g, y, "y") == SB_OK);
    sb_program *bad = NULL;
    const sb_compile_params cp = {.device = SB_DEVICE_CUDA, .page_locked_outputs = 2};
    CHECK(sb_graph_compile(g, &cp, &bad) == SB_ERR_INVALID_ARG && !bad && strstr(sb_last_error(), "page_locked_outputs 2"));
    sb_graph_free(g);
}

/* sb_tensor_write on a tensor bound into a device program: the backend's copy takes the new data
 * (the stand-in computes from its copy, so a stale one shows in the next run) */
static void test_write_bound(void) {
    const int64_t N = 24;
    sb_tensor *w = dl_f32(SB_DEVICE_CUDA, N, 1, NULL), *x = dl_f32(SB_DEVICE_CPU, N, 1, NULL);
    sb_graph *g = NULL;
    sb_value vx = -1, vw = -1, y = -1;
    CHECK(sb_graph_create(&g) == SB_OK && sb_graph_input(g, SB_INPUT_DATA, "x", SB_TYPE_F32, 1, &N, &vx) == SB_OK);
    CHECK(sb_graph_tensor(g, SB_INPUT_DATA, w, &vw) == SB_OK);
    CHECK(sb_graph_op(g, "add", (sb_value[2]){vx, vw}, 2, NULL, 0, &y) == SB_OK && sb_graph_output(g, y, "y") == SB_OK);
    sb_program *pr = NULL;
    CHECK(sb_graph_compile(g, &(sb_compile_params){.device = SB_DEVICE_CUDA}, &pr) == SB_OK);
    sb_graph_free(g);
    for (int round = 0; round < 2; round++) {
        float v[24];
        for (int64_t i = 0; i < N; i++) v[i] = dl_rand();
        const int r0 = dev_fake.refreshes;
        CHECK(sb_tensor_write(w, v, sizeof v) == SB_OK);
        CHECK(round == 0 || dev_fake.refreshes == r0 + 1); /* the copy exists after the first run */
        sb_tensor *out[1] = {NULL};
        CHECK(sb_program_run(pr, &x, 1, out, 1) == SB_OK);
        float *o = rd(out[0], NULL), *xv = rd(x, NULL);
        int bad = 0;
        for (int64_t i = 0; i < N; i++) bad += o[i] != xv[i] + v[i];
        CHECKF(bad == 0, "round %d: %d of %d sums wrong", round, bad, (int)N);
        free(o), free(xv);
        sb_tensor_free(out[0]);
    }
    sb_program_free(pr);
    sb_tensor_free(w), sb_tensor_free(x);
}

int main(void) {
    CHECK(backend_kind_cpu.create(&(backend_params){.n_threads = 2}, &dev_fake.cpu) == SB_OK);
    api_dev_install(&dev_fake.base);
    test_calls();
    test_page_locked_outputs();
    test_write_bound();
    dl_check_all(SB_DEVICE_CUDA, 0, 0); /* the stand-in computes with the CPU's kernels: exact */
    printf("stand-in device: %d uploads, %d downloads, %d refreshes, %d drops, %d copies left\n", dev_fake.uploads, dev_fake.downloads,
           dev_fake.refreshes, dev_fake.drops, dev_fake.n);
    CHECK(dev_fake.refreshes > 0 && dev_fake.downloads > 0);
    CHECK(dev_fake.n == 0); /* every tensor and program freed: no copy left behind */
    CHECK(dev_fake.n_pinned == 0 && dev_fake.host_allocs == dev_fake.host_frees); /* nor page-locked memory */
    api_dev_install(NULL);
    dev_fake.cpu->ops->free(dev_fake.cpu);
    return test_summary();
}
