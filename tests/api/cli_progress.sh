#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# Progress of the long operations (tools/sb/progress.c): with stderr not a terminal, `sb synth`,
# `sb quantize` and the model load of `sb run` / `sb chat` each print exactly one summary line on
# stderr and no bar (no carriage return, no escape code); on a terminal (a pty from script(1)) the
# bar is drawn ("\r\033[K" + "[###") and erased, and the same summary line follows.
. "$(dirname "$0")/../cli_lib.sh"
cr=$(printf '\r')
esc=$(printf '\033')
one_line() { # FILE PATTERN: FILE is exactly one line matching PATTERN, without CR or ESC
    [ "$(wc -l < "$1")" = 1 ] && grep -q -e "$2" "$1" && ! grep -q -e "$cr" -e "$esc" "$1"
}
"$sb" synth --preset tiny-llama -o "$tmp/a.gguf" --threads 2 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && one_line "$tmp/err" "^synth: wrote $tmp/a.gguf (tiny-llama, F32) in [0-9.]* s\$" && ok || bad "synth: rc=$rc $(cat "$tmp/err")"
"$sb" quantize "$tmp/a.gguf" "$tmp/b.gguf" Q4_K_M --threads 2 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && one_line "$tmp/err" "^quantize: wrote $tmp/b.gguf (Q4_K_M): model size = .* MiB (.* BPW) -> quantized size = .* in [0-9.]* s\$" && ok || bad "quantize: rc=$rc $(cat "$tmp/err")"
"$sb" run -m "$tmp/b.gguf" -p hi -n 2 --device cpu > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && [ "$(grep -c '^loaded ' "$tmp/err")" = 1 ] && grep -q "^loaded $tmp/b.gguf: [0-9.]* MB of tensors in [0-9.]* s\$" "$tmp/err" &&
    ! grep -q -e "$cr" -e "$esc" "$tmp/err" && ok || bad "run: rc=$rc $(cat "$tmp/err")"
: | "$sb" chat -m "$tmp/b.gguf" --device cpu > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && one_line "$tmp/err" "^loaded $tmp/b.gguf: " && ok || bad "chat: rc=$rc $(cat "$tmp/err")"
# failures: the error line only, no summary
"$sb" quantize "$tmp/a.gguf" "$tmp/c.gguf" Q9 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && one_line "$tmp/err" '^error: SB_ERR_INVALID_ARG: ' && ok || bad "failed quantize: rc=$rc $(cat "$tmp/err")"
# on a terminal
if command -v script > /dev/null; then
    script -q -e -c "'$sb' synth --preset tiny-llama -o '$tmp/t.gguf' --threads 2" "$tmp/typescript" > /dev/null 2>&1; rc=$?
    [ $rc = 0 ] && grep -q "${cr}${esc}\[Kwriting \[#" "$tmp/typescript" && grep -q "synth: wrote $tmp/t.gguf (tiny-llama, F32) in" "$tmp/typescript" &&
        ok || bad "synth on a terminal: rc=$rc $(od -c "$tmp/typescript" | head -5)"
    script -q -e -c "'$sb' run -m '$tmp/b.gguf' -p hi -n 2 --device cpu" "$tmp/typescript" > /dev/null 2>&1; rc=$?
    [ $rc = 0 ] && grep -q "${cr}${esc}\[Kloading \[#" "$tmp/typescript" && grep -q "loaded $tmp/b.gguf" "$tmp/typescript" &&
        ok || bad "load on a terminal: rc=$rc $(od -c "$tmp/typescript" | head -5)"
else
    echo "SKIP terminal part: script(1) absent"
fi
finish
