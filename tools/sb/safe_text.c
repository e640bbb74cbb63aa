/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/safe_text.c — untrusted bytes (model metadata, tensor names, error texts that quote
 * them) made safe for a terminal or for JSON. Uses only the C library.
 * Terminal: control characters (C0, DEL, C1), line/paragraph separators and bidi controls become
 * visible escapes, so a file cannot move the cursor, retitle the window or reorder what is shown;
 * bytes that are not UTF-8 become \xNN. JSON: a valid UTF-8 copy (cJSON does not validate).
 */
#include "sb.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Length (1..4) of the well-formed UTF-8 sequence at s (n bytes left) and its code point, or 0 when
 * the bytes there are not UTF-8 (overlong, surrogate, > U+10FFFF, truncated, stray continuation). */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
    if (s[0] < 0x80) return *cp = s[0], 1;
    size_t len = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 0;
    if (!len || len > n || s[0] > 0xF4) return 0;
    uint32_t c = s[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = c << 6 | (s[i] & 0x3F);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return len;
}

/* Code points a terminal acts on: C0, DEL, C1, line/paragraph separators, bidi marks, embeddings,
 * overrides and isolates (which reorder what is displayed). */
static int is_control(uint32_t c) {
    return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x2028 || c == 0x2029 || (c >= 0x202A && c <= 0x202E) ||
           (c >= 0x2066 && c <= 0x2069) || c == 0x200E || c == 0x200F || c == 0x061C;
}

void sb_put_safe(FILE *f, const char *s, size_t n, int quoted) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        size_t l = utf8_next(u + i, n - i, &c);
        if (!l) {
            fprintf(f, "\\x%02x", u[i++]);
            continue;
        }
        if (quoted && (c == '"' || c == '\\')) fprintf(f, "\\%c", (char)c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x80 && is_control(c)) fprintf(f, "\\x%02x", (unsigned)c);
        else if (is_control(c)) fprintf(f, "\\u%04x", (unsigned)c);
        else fwrite(u + i, 1, l, f);
        i += l;
    }
}

char *sb_utf8_clean(const char *s, size_t n, int *lossy) {
    char *out = (char *)malloc(3 * n + 1), *o = out;
    if (!out) return NULL;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        size_t l = utf8_next(u + i, n - i, &c);
        if (!l || c == 0) {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3;
            *lossy = 1;
            i++;
        } else {
            memcpy(o, u + i, l);
            o += l;
            i += l;
        }
    }
    *o = 0;
    return out;
}
