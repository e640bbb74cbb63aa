/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * quant/quant.h — reference (plain C) quantize/dequantize entry points of every block format.
 * Layer 1 (quant). Bit-exact with llama.cpp's quantize_row_*_ref / dequantize_row_* (formats.md §2).
 * Block structs live in quant/blocks.h. This file is owned by the quant-formats work; the
 * registration hook below is how types.c learns the converters.
 */
#ifndef SB_QUANT_QUANT_H
#define SB_QUANT_QUANT_H

#include "quant/types.h"

/* Fill the converter columns of the traits table (called once, thread-safe, by qk_get). */
void qk_register_converters(qk_traits *table);

#endif
