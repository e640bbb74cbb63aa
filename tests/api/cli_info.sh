#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# `sb info` on every shared GGUF file (exit 0, JSON parses), and its exit statuses: 1 with one
# "error: STATUS: detail" line for bad files, 2 for usage errors.
. "$(dirname "$0")/../cli_lib.sh"
for f in "$data"/models/*.gguf "$data"/vocab/*.gguf; do
    [ -f "$f" ] || continue
    if "$sb" info "$f" > "$tmp/out" 2>&1 && grep -q '^totals:' "$tmp/out"; then ok; else bad "sb info $f"; fi
    if "$sb" info --json "$f" > "$tmp/out.json" && python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/out.json" 2>/dev/null; then ok
    elif ! command -v python3 >/dev/null; then ok; else bad "sb info --json $f: invalid JSON"; fi
done
printf 'GGUX' > "$tmp/bad.gguf"
"$sb" info "$tmp/bad.gguf" > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -q '^error: SB_ERR_FORMAT_' "$tmp/err" && ok || bad "bad magic: rc=$rc $(cat "$tmp/err")"
"$sb" info "$tmp/missing.gguf" > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && grep -q '^error: SB_ERR_IO: ' "$tmp/err" && ok || bad "missing file: rc=$rc"
expect_rc 2 "no args" "$sb" info
expect_rc 2 "bad option" "$sb" info --bogus x
expect_rc 2 "unknown command" "$sb" nosuchcommand
# a file that loads as a model: one line with the weights a token reads (resident), the tables it
# only gathers a row of per token (test-gemma4: the [256, 512] F32 PLE table, 524288 bytes) and the
# KV cache per token (3 sliding layers of K+V 2x64 wide, 1 global of 2x128, 4 shared-KV layers with
# none: 1280 values); a vocabulary-only file gets no such line
g4="$data/models/test-gemma4-f32.gguf"
if [ -f "$g4" ]; then
    "$sb" info "$g4" > "$tmp/out" 2> "$tmp/err"
    grep -qx 'model:       gemma4; 20493440 bytes of weights read per token (resident), 524288 in tables gathered one row per token; KV cache 2560 bytes per token (f16), 5120 (f32)' "$tmp/out" &&
        [ ! -s "$tmp/err" ] && ok || bad "info gemma4: $(grep '^model:' "$tmp/out") $(cat "$tmp/err")"
    "$sb" info "$data/vocab/ggml-vocab-qwen2.gguf" 2>&1 | grep -q '^model:' && bad "info: a model line for a vocabulary-only file" || ok
    # the same numbers as --json's "model" object (bench/matrix.sh reads it); none for a vocabulary
    "$sb" info --json "$g4" > "$tmp/out.json" 2> /dev/null
    python3 -c 'import json,sys; m = json.load(open(sys.argv[1]))["model"]; sys.exit(0 if (m["arch"], m["weight_bytes_per_token"], m["gathered_table_bytes"], m["kv_bytes_per_token_f16"], m["kv_bytes_per_token_f32"]) == ("gemma4", 20493440, 524288, 2560, 5120) else 1)' "$tmp/out.json" &&
        ok || bad "info --json gemma4: model object $(grep -A6 '"model"' "$tmp/out.json")"
    "$sb" info --json "$data/vocab/ggml-vocab-qwen2.gguf" 2> /dev/null | grep -q '"model"' && bad "info --json: a model object for a vocabulary" || ok
fi
finish
