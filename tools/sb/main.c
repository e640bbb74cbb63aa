/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/main.c — the `sb` command: dispatches to one subcommand per file (cmd_*.c).
 * Layer 3 (tools): uses only include/sonicboom.h, like any third-party program would.
 * Exit status: 0 success, 1 the operation failed (one line "error: <STATUS>: <detail>" on
 * stderr), 2 usage error. Standard output is flushed and closed before exiting: a write error
 * there (a full disk, a closed pipe) is exit 1 with one line "error: SB_ERR_IO: standard output:
 * REASON" (cli_io.c), for every command.
 */
#include "args.h"
#include "cli_io.h"
#include "sb.h"

#include <stdio.h>
#include <string.h>

static const sb_command commands[] = {
    {"run", "generate text from a prompt (default: the embedded model)", cmd_run},
    {"chat", "talk with a model in the terminal, turn by turn (default: the embedded model)", cmd_chat},
    {"bench", "llama-bench-style prefill/decode benchmark with GB/s and prefix-reuse latency", cmd_bench},
    {"logits", "evaluate a reference file's tokens and write our logits in its format", cmd_logits},
    {"perplexity", "perplexity of a model on a text file", cmd_perplexity},
    {"info", "print a GGUF file's header, metadata and tensor table", cmd_info},
    {"tokenize", "print the token ids (or pieces) of a text, loading only the vocabulary", cmd_tokenize},
    {"quantize", "quantize a GGUF model with llama-quantize's per-tensor mixes", cmd_quantize},
    {"serve", "OpenAI-compatible HTTP server: chat and completions, streaming, metrics", cmd_serve},
    {"synth", "write a random-weight model with a real model's shapes and metadata", cmd_synth},
    {"version", "print the library version", cmd_version},
};

static void usage(FILE *f) {
    fprintf(f, "usage: sb <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n'sb <command> --help' describes a command's options.\n");
}

int cmd_version(int argc, char **argv) {
    if (argc > 1) return usage_error("version", "unexpected argument '%s' (sb version takes none)", argv[1]);
    printf("sonicboom %s (library %s)\n", SB_VERSION_STRING, sb_version_string());
    sb_backend_info bi;
    if (sb_backend_get_info(&bi) == SB_OK) {
        printf("cpu: %s kernels\n", bi.cpu_isa);
        if (!bi.cuda_compiled) printf("cuda: not compiled in\n");
        else if (bi.cuda_devices) printf("cuda: %d device(s), %s (sm_%d)\n", bi.cuda_devices, bi.cuda_device_name, bi.cuda_cc);
        else printf("cuda: compiled in, no usable device (%s)\n", bi.cuda_error);
    }
    return 0;
}

int sb_cli_fail(sb_status s) {
    if (s == SB_ERR_CANCELLED && cli_stdout_failed()) return 1; /* stopped by a stdout error: cli_io_finish says it */
    fprintf(stderr, "error: %s: ", sb_status_str(s));
    sb_put_safe(stderr, sb_last_error(), strlen(sb_last_error()), 0); /* it may quote the file's strings */
    fputc('\n', stderr);
    return 1;
}

static int dispatch(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "sb: no command given (see 'sb --help')\n");
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) return cmd_version(argc - 1, argv + 1);
    if (sb_version_number() != SB_VERSION_NUMBER) {
        fprintf(stderr, "error: sb was built for libsonicboom %s but loaded %s\n", SB_VERSION_STRING,
                sb_version_string());
        return 1;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "sb: unknown command '%s' (see 'sb --help')\n", argv[1]);
    return 2;
}

int main(int argc, char **argv) {
    cli_io_init();
    /* the library's warnings reach stderr in every command (e.g. a vocabulary without
     * tokenizer.ggml.pre tokenizes with the default pre-tokenizer: never silently) */
    sb_log_set(sb_cli_log, NULL, SB_LOG_WARN);
    return cli_io_finish(dispatch(argc, argv));
}
