/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/backends.h — the backend kinds this build has (backend/backend.h): "cpu" always
 * (backend_cpu.c), "cuda" when the CUDA backend is compiled in (backend_cuda.c). A session finds
 * the kind it wants by name and drives it only through backend_ops.
 * Layer 2 (runtime).
 */
#ifndef SB_RUNTIME_BACKENDS_H
#define SB_RUNTIME_BACKENDS_H

#include "backend/backend.h"
#include "graph/ir.h"

struct plan;

/* The kind called name, or NULL when this build has none. */
const backend_kind *backend_kind_find(const char *name);

/* g planned for be's target (the passes and the memory plan) and prepared on be, with be's settings
 * bound meanwhile (backend_bind: the target's callbacks read them); the inputs per_run[0..n_per_run)
 * (nodes of g) are bound afresh each run (plan_input.per_run). *out: the plan, NULL on failure. */
sb_status backend_plan(backend *be, const ir_graph *g, const ir_ref *per_run, int n_per_run, struct plan **out);

extern const backend_kind backend_kind_cpu;
#ifdef SB_HAVE_CUDA
extern const backend_kind backend_kind_cuda;
#endif

#endif
