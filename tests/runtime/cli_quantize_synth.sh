#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# `sb quantize` / `sb synth` as programs: exit statuses (0 ok, 1 failure with one "error: STATUS:
# detail" line, 2 usage), no progress bar when stderr is not a terminal (one summary line instead),
# the re-quantize warning (with --allow-requantize; cli_quantize_flags.sh tests the flags),
# synth --type == synth + quantize, and a reference file reproduced through the CLI.
. "$(dirname "$0")/../cli_lib.sh"

"$sb" synth --preset tiny-qwen2 -o "$tmp/a.gguf" --seed 3 --threads 2 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && [ -f "$tmp/a.gguf" ] && ok || bad "synth: rc=$rc $(cat "$tmp/err")"
"$sb" quantize "$tmp/a.gguf" "$tmp/b.gguf" Q4_K_M --threads 2 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -q '^quantize: wrote .*: model size = .* -> quantized size = ' "$tmp/err" && ! grep -q "$(printf '\r')" "$tmp/err" && ok || bad "quantize: rc=$rc stderr: $(cat "$tmp/err")"
"$sb" synth --preset tiny-qwen2 -o "$tmp/c.gguf" --seed 3 --type q4_k_m > /dev/null 2>&1; rc=$?
[ $rc = 0 ] && cmp -s "$tmp/b.gguf" "$tmp/c.gguf" && ok || bad "synth --type Q4_K_M differs from synth + quantize"
"$sb" quantize --allow-requantize "$tmp/b.gguf" "$tmp/d.gguf" Q8_0 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && grep -q '^warning: .*dequantized' "$tmp/err" && ok || bad "requantize warning: rc=$rc $(cat "$tmp/err")"
ls "$tmp" | grep -q -e '\.tmp\.' -e '\.scratch\.' && bad "temporary files left" || ok

expect_rc 2 "quantize no args" "$sb" quantize
expect_rc 2 "quantize --threads 0" "$sb" quantize a b Q8_0 --threads 0
"$sb" quantize "$tmp/a.gguf" "$tmp/e.gguf" Q9_K > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -q '^error: SB_ERR_INVALID_ARG: .*Q4_K_M' "$tmp/err" && [ ! -e "$tmp/e.gguf" ] && ok || bad "unknown type: rc=$rc $(cat "$tmp/err")"
"$sb" quantize "$tmp/missing.gguf" "$tmp/e.gguf" Q8_0 > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && grep -q '^error: SB_ERR_IO: ' "$tmp/err" && ok || bad "missing input: rc=$rc"
"$sb" synth --preset nosuch -o "$tmp/e.gguf" > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && grep -q '^error: SB_ERR_INVALID_ARG: .*qwen2.5-0.5b' "$tmp/err" && ok || bad "unknown preset: rc=$rc"
expect_rc 2 "synth without preset" "$sb" synth -o "$tmp/e.gguf"
expect_rc 2 "negative seed" "$sb" synth --preset tiny-qwen2 -o "$tmp/e.gguf" --seed -1
"$sb" synth --list > "$tmp/out" 2>&1; rc=$?
[ $rc = 0 ] && grep -q 'qwen2.5-0.5b' "$tmp/out" && grep -q 'gemma3-1b' "$tmp/out" && ok || bad "synth --list: rc=$rc"

if [ -f "$data/models/test-qwen2-f32.gguf" ]; then
    "$sb" quantize "$data/models/test-qwen2-f32.gguf" "$tmp/r.gguf" Q3_K_M > /dev/null 2>&1; rc=$?
    [ $rc = 0 ] && cmp -s "$tmp/r.gguf" "$data/models/test-qwen2-q3_k_m.gguf" && ok || bad "CLI Q3_K_M differs from llama-quantize's"
else
    echo "SKIP reference comparison: shared data absent"
fi
finish
