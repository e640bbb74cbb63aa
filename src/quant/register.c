/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * quant/register.c — fills the converter columns of the traits table once.
 * Placeholder table until the per-format reference files land: no converters yet, and every
 * vec_dot_type equals the type itself.
 */
#include "quant/quant.h"

void qk_register_converters(qk_traits *table) { (void)table; }
