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

/* The kind called name, or NULL when this build has none. */
const backend_kind *backend_kind_find(const char *name);

extern const backend_kind backend_kind_cpu;
#ifdef SB_HAVE_CUDA
extern const backend_kind backend_kind_cuda;
#endif

#endif
