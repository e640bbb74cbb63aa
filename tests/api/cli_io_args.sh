#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# Usage errors: exit 2 and exactly one line "sb CMD: REASON (see 'sb CMD --help')" (args.c
# usage_error); numbers are decimal only (parse_int: "010" is ten), whole, in range.
. "$(dirname "$0")/../cli_lib.sh"
. "$(dirname "$0")/io_lib.sh"
m="$data/models/test-llama-q8_0.gguf"
[ -f "$m" ] || m="$tmp/absent.gguf" # every case below fails in argument parsing, before any load
watch_begin
u() { want=$1; shift; expect_err 2 "$*" "$want" "$sb" "$@"; }
u "sb run: -n '1x': trailing characters after the number (expected an integer in [-1, 2147483647])" run -m "$m" -p hi -n 1x
u "sb run: -n '99999999999999999999': out of range [-1, 2147483647] (see 'sb run --help')" run -m "$m" -p hi -n 99999999999999999999
u "sb run: -c '-5': out of range [0, 16777216]" run -m "$m" -p hi -c -5
u "sb run: -c '18446744073709551617': out of range" run -m "$m" -p hi -c 18446744073709551617
u "sb run: -c '-9223372036854775809': out of range" run -m "$m" -p hi -c -9223372036854775809
u "sb run: -n ' 5': not a decimal integer" run -m "$m" -p hi -n " 5"
u "sb run: -n '+5': not a decimal integer" run -m "$m" -p hi -n +5
u "sb run: -n '': an empty value" run -m "$m" -p hi -n ""
u "sb run: --seed '0x10': expected -1 (random) or a decimal integer" run -m "$m" -p hi --seed 0x10
u "sb run: --temp 'nan': expected a decimal number in [0, 100]" run -m "$m" -p hi --temp nan
u "sb run: --temp '0x1p1': expected a decimal number" run -m "$m" -p hi --temp 0x1p1
u "sb run: option -n needs a value" run -m "$m" -p hi -n
u "sb run: unknown option '--bogus'" run -m "$m" -p hi --bogus
u "sb run: give exactly one of -p PROMPT or -f FILE" run -m "$m"
u "sb run: --device 'tpu': expected auto, cpu or cuda" run -m "$m" -p hi --device tpu
u "at most 64 values" bench -m "$m" -p 1-65
u "sb bench: -d '8,': expected a list of counts" bench -m "$m" -d 8,
u "sb bench: -p '99999999': expected a list of counts" bench -m "$m" -p 99999999
u "sb perplexity: -c '1e9': trailing characters after the number" perplexity -m "$m" -f x -c 1e9
u "sb perplexity: -f TEXTFILE is required" perplexity -m "$m"
u "sb logits: missing --ref IN.ref (see 'sb logits --help')" logits -m "$m"
u "sb logits: missing -o OUT.ref" logits -m "$m" --ref x
u "sb logits: --kv-type 'q8': expected f32 or f16" logits -m "$m" --ref x -o y --kv-type q8
u "sb tokenize: missing -m FILE" tokenize -p x
u "sb tokenize: give exactly one of -p TEXT or -f TEXTFILE" tokenize -m "$m"
u "sb info: no FILE given" info
u "sb info: unknown option '--bogus'" info --bogus
u "sb quantize: needs IN.gguf OUT.gguf TYPE" quantize a b
u "sb synth: --seed '010x': trailing characters after the number" synth --preset x -o "$tmp/s.gguf" --seed 010x
u "sb synth: missing -o OUT.gguf" synth --preset x
u "sb: no command given (see 'sb --help')"
u "sb: unknown command 'frobnicate' (see 'sb --help')" frobnicate
# decimal, not octal: --seed 010 and --seed 10 give the same text; 8 differs from both
if [ -f "$data/models/test-llama-q8_0.gguf" ]; then
    a=$("$sb" run -m "$m" -p "In the" -n 8 --seed 010 --temp 1 2>/dev/null)
    b=$("$sb" run -m "$m" -p "In the" -n 8 --seed 10 --temp 1 2>/dev/null)
    [ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "--seed 010 is not 10: '$a' vs '$b'"
fi
watch_end
finish
