/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/serve/serve_web.h — the chat page's files (tools/serve/web), compiled into sb-serve by
 * cmake/embed_web.cmake: "/" is index.html, the others by name ("/chat.js", "/chat.css").
 */
#ifndef SB_TOOLS_SERVE_WEB_H
#define SB_TOOLS_SERVE_WEB_H

#include <stddef.h>

typedef struct serve_web_file {
    const char *path;           /* the URL path */
    const char *type;           /* Content-Type */
    const unsigned char *data;  /* size bytes (and a NUL after them) */
    size_t size;
} serve_web_file;

extern const serve_web_file serve_web_files[];
extern const size_t serve_web_n_files;

#endif
