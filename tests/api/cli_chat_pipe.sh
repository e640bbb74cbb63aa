#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# `sb chat` with stdin not a terminal (scripting): no prompt is printed, each input line is one
# turn and its answer one output line; the first answer equals `sb run --chat`'s (greedy, the
# embedded model); the second turn reuses the whole cached conversation (prompt + answer - 1
# tokens, from the -v line); /system, /reset and unknown commands; a context too small for the next
# turn is one line and the program goes on; EOF ends with status 0; bad flags are usage errors (2),
# a missing model exit 1 with one "error:" line.
. "$(dirname "$0")/../cli_lib.sh"
want=$("$sb" run --chat -p "Who begat Enos?" -n 12 --temp 0 --device cpu 2> /dev/null | head -1)
printf 'Who begat Enos?\nAnd then?\n' | "$sb" chat -n 12 --temp 0 --device cpu -v > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && ok || bad "two turns: status $rc: $(cat "$tmp/err")"
[ "$(sed -n 1p "$tmp/out")" = "$want" ] && ok || bad "first answer '$(sed -n 1p "$tmp/out")', sb run --chat says '$want'"
[ "$(wc -l < "$tmp/out")" = 2 ] && ! grep -q '^>' "$tmp/out" && ok || bad "output: $(cat "$tmp/out")"
p1=$(sed -n 's/^\[prompt \([0-9]*\) tokens.*answer \([0-9]*\) tokens.*/\1 \2/p' "$tmp/err" | sed -n 1p)
r2=$(sed -n 's/^\[prompt [0-9]* tokens, \([0-9]*\) reused.*/\1/p' "$tmp/err" | sed -n 2p)
set -- $p1
[ -n "$r2" ] && [ "$r2" = $(($1 + $2 - 1)) ] && ok || bad "turn 2 reused '$r2' tokens, want $1 + $2 - 1"

# /system starts over with a system message; /reset keeps it; an unknown command is one line
printf '/system You are terse.\nWho begat Enos?\n/reset\nWho begat Enos?\n/nonsense\n/exit\nnot read\n' |
    "$sb" chat -n 8 --temp 0 --device cpu -v > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && [ "$(wc -l < "$tmp/out")" = 2 ] && [ "$(sed -n 1p "$tmp/out")" = "$(sed -n 2p "$tmp/out")" ] && ok ||
    bad "/system + /reset: status $rc, $(cat "$tmp/out")"
grep -q "unknown command '/nonsense'" "$tmp/err" && grep -q 'system message set' "$tmp/err" && ok || bad "commands: $(cat "$tmp/err")"
n1=$(sed -n 's/^\[prompt \([0-9]*\) tokens.*/\1/p' "$tmp/err" | sed -n 1p)
[ -n "$n1" ] && [ "$n1" -gt 39 ] && ok || bad "the system message is not in the prompt ($n1 tokens)"

# the context fills: the answer is cut with one line, a turn that does not fit is refused, EOF exits 0
printf 'hi\nmore\n' | "$sb" chat -n -1 -c 64 --temp 0 --device cpu > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && [ "$(grep -c 'context full' "$tmp/err")" = 2 ] && grep -q 'answer was cut' "$tmp/err" &&
    grep -q 'does not fit\|conversation is [0-9]* tokens' "$tmp/err" && ok || bad "context full: status $rc: $(cat "$tmp/err")"
: | "$sb" chat --device cpu > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && [ ! -s "$tmp/out" ] && [ "$(grep -vc '^loaded ' "$tmp/err")" = 0 ] && ok || bad "empty input: status $rc: $(cat "$tmp/out" "$tmp/err")"

expect_rc 2 "unknown flag" "$sb" chat --bogus
expect_rc 2 "bad -n" "$sb" chat -n x
expect_rc 2 "bad --device" "$sb" chat --device tpu
"$sb" chat -m "$tmp/missing.gguf" < /dev/null > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -q '^error: SB_ERR_IO: ' "$tmp/err" && ok || bad "missing model: status $rc: $(cat "$tmp/err")"
finish
