/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/guile/fake_version.c — a stand-in libsonicboom.so of another version (2.0.0), only for
 * tests/guile to check that the (sonicboom) module refuses to load over a library whose version it
 * was not written for. It exports just the two version functions the module reads first.
 */
__attribute__((visibility("default"))) int sb_version_number(void);
__attribute__((visibility("default"))) const char *sb_version_string(void);

int sb_version_number(void) { return 2000000; }
const char *sb_version_string(void) { return "2.0.0"; }
