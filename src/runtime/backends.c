/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/backends.c — the registry of backend kinds (backends.h).
 * Layer 2 (runtime).
 */
#include "runtime/backends.h"

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
