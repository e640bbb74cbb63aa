/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/cmd_tokenize.c — `sb tokenize`: load only a GGUF file's vocabulary and print the token
 * ids of a text (one line, space-separated) or, with --pieces, one "id<TAB>piece" line per token.
 * Layer 3 (tools): public header only. Pieces are printed with control characters and backslash
 * escaped (\n, \t, \r, \\, \xNN) so every token stays on its line; other bytes are written as is.
 */
#include "args.h"
#include "cli_io.h"
#include "sb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: sb tokenize -m FILE (-p TEXT | -f TEXTFILE) [--add-special] [--parse-special] [--pieces]\n"
               "  -m FILE          GGUF file (only its tokenizer metadata is read)\n"
               "  -p TEXT          text to tokenize\n"
               "  -f TEXTFILE      read the text from a file (bytes as they are)\n"
               "  --add-special    add BOS/EOS as the vocabulary asks\n"
               "  --parse-special  recognise control tokens (e.g. <|im_start|>) written in the text\n"
               "  --pieces         print one 'id<TAB>piece' line per token (pieces escaped)\n");
}

static void put_escaped(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '\\') fputs("\\\\", stdout);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL, *file = NULL;
    int add_special = 0, parse_special = 0, pieces = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "-m") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(a, "-p") && i + 1 < argc) text = argv[++i];
        else if (!strcmp(a, "-f") && i + 1 < argc) file = argv[++i];
        else if (!strcmp(a, "--add-special")) add_special = 1;
        else if (!strcmp(a, "--parse-special")) parse_special = 1;
        else if (!strcmp(a, "--pieces")) pieces = 1;
        else {
            return usage_error("tokenize", "unknown or incomplete option '%s'", a);
        }
    }
    if (!model) return usage_error("tokenize", "missing -m FILE");
    if (!text == !file) return usage_error("tokenize", "give exactly one of -p TEXT or -f TEXTFILE");
    size_t len = 0;
    char *owned = NULL;
    if (file) {
        owned = read_text_file(file, &len);
        if (!owned) {
            fprintf(stderr, "error: SB_ERR_IO: %s\n", read_file_error());
            return 1;
        }
        text = owned;
    } else {
        len = strlen(text);
    }
    sb_vocab *v = NULL;
    cli_watch_file(model);
    sb_status st = sb_vocab_load(model, &v);
    if (st != SB_OK) {
        free(owned);
        return sb_cli_fail(st);
    }
    size_t n = 0, cap = len + 16;
    int32_t *ids = malloc(cap * sizeof *ids);
    st = ids ? sb_tokenize(v, text, len, add_special, parse_special, ids, cap, &n) : SB_ERR_OOM;
    if (st == SB_ERR_BUFFER_TOO_SMALL) {
        free(ids);
        cap = n;
        ids = malloc((cap ? cap : 1) * sizeof *ids);
        st = ids ? sb_tokenize(v, text, len, add_special, parse_special, ids, cap, &n) : SB_ERR_OOM;
    }
    int rc = 0;
    if (st != SB_OK) {
        rc = sb_cli_fail(st);
    } else if (pieces) {
        char small[256];
        for (size_t i = 0; i < n; i++) {
            size_t pn = 0;
            char *buf = small;
            sb_status ps = sb_token_to_piece(v, ids[i], 1, buf, sizeof small, &pn);
            if (ps == SB_ERR_BUFFER_TOO_SMALL && (buf = malloc(pn + 1)) != NULL)
                ps = sb_token_to_piece(v, ids[i], 1, buf, pn + 1, &pn);
            if (ps != SB_OK) { rc = sb_cli_fail(ps); if (buf != small) free(buf); break; }
            printf("%d\t", ids[i]);
            put_escaped(buf, pn);
            putchar('\n');
            if (buf != small) free(buf);
        }
    } else {
        for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        putchar('\n');
    }
    free(ids);
    free(owned);
    sb_vocab_free(v);
    return rc;
}
