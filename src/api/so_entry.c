/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * api/so_entry.c — the one translation unit of libsonicboom.so itself; every other object comes
 * from the layer archives, linked whole. Holds the version functions.
 */
#include "sonicboom.h"

int sb_version_number(void) { return SB_VERSION_NUMBER; }
const char *sb_version_string(void) { return SB_VERSION_STRING; }
