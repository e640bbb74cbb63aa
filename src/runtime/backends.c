/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/backends.c — the registry of backend kinds, and planning a graph for one (backends.h).
 * Layer 2 (runtime).
 */
#include "runtime/backends.h"

#include "graph/plan.h"

#include <string.h>

static const backend_kind *const kinds[] = {
    &backend_kind_cpu,
#ifdef SB_HAVE_CUDA
    &backend_kind_cuda,
#endif
};

const backend_kind *backend_kind_find(const char *name) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strcmp(kinds[i]->name, name)) return kinds[i];
    return NULL;
}

sb_status backend_plan(backend *be, const ir_graph *g, const ir_ref *per_run, int n_per_run, plan **out) {
    *out = NULL;
    const void *bound = backend_bind(be);
    plan_target t;
    be->ops->target(be, &t);
    sb_status st = plan_build(g, &t, NULL, out);
    for (int i = 0; st == SB_OK && i < n_per_run; i++) { /* by name: the planned graph is a rewritten copy */
        const int32_t slot = plan_find_input(*out, g->nodes[per_run[i]].name);
        if (slot >= 0) (*out)->inputs[slot].per_run = true;
    }
    if (st == SB_OK) st = be->ops->prepare(be, *out);
    backend_unbind(be, bound);
    if (st != SB_OK && *out) {
        plan_free(*out);
        *out = NULL;
    }
    return st;
}
