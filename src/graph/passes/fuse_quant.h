/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/fuse_quant.h — the walk the two quantize fusions (fuse_norm_quant, fuse_act_quant)
 * share: for every QUANTIZE node of the graph as it was on entry, ask the pass's matcher whether
 * the producer chain of its input folds into one node; if so append that node with the quantize's
 * dtype, point the quantize's users at it, and finally drop what is no longer reached.
 * Layer 2 (graph). Private to graph/passes.
 */
#ifndef SB_GRAPH_PASSES_FUSE_QUANT_H
#define SB_GRAPH_PASSES_FUSE_QUANT_H

#include "graph/plan.h"

#include <stdbool.h>

/* Fill *fused (all but dtype) and return true when x, the input of a QUANTIZE node, and its
 * producers fold into one node; uses[] are the use counts on entry to the pass. */
typedef bool (*quant_fuse_fn)(const ir_graph *g, const int32_t *uses, ir_ref x, ir_node *fused);

/* The walk above; pass names the pass in an SB_ERR_OOM message. Returns g->status, else
 * ir_compact's status. */
sb_status fuse_into_quantize(ir_graph *g, const char *pass, quant_fuse_fn fuse);

#endif
