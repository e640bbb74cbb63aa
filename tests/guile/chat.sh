#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# tests/guile/chat.sh SRC LIB ASAN SB MODEL — examples/guile/chat.scm with input piped in: two
# turns, greedy, answer for answer what `sb chat` answers to the same lines (the second turn sees
# the first: the conversation is kept); /reset starts over (its answer is the first one again);
# EOF ends with status 0; a missing model is an error (status 1, the library's message).
set -u
src=$1 lib=$2 asan=$3 sb=$4 model=$5
run() { sh "$src/tests/guile/run.sh" "$src" "$lib" "$asan" examples/guile/chat.scm "$@"; }
fail=0 pass=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
printf 'Who begat Enos?\nAnd then?\n' | "$sb" chat -m "$model" -n 12 --temp 0 --device cpu > "$tmp/want" 2> /dev/null
printf 'Who begat Enos?\nAnd then?\n/reset\nWho begat Enos?\n' | run "$model" 12 0 > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc = 77 ] && { cat "$tmp/out"; exit 77; }
[ $rc = 0 ] && ok || bad "status $rc: $(cat "$tmp/err")"
[ "$(wc -l < "$tmp/want")" = 2 ] && [ "$(sed -n 1,2p "$tmp/out")" = "$(cat "$tmp/want")" ] && ok ||
    bad "answers '$(cat "$tmp/out")', sb chat says '$(cat "$tmp/want")'"
[ "$(wc -l < "$tmp/out")" = 3 ] && [ "$(sed -n 3p "$tmp/out")" = "$(sed -n 1p "$tmp/out")" ] && ok || bad "after /reset: $(cat "$tmp/out")"
printf 'hi\n' | run /no/such.gguf > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && grep -q 'SB_ERR_IO' "$tmp/err" && ok || bad "missing model: status $rc, $(tail -3 "$tmp/err")"
echo "$pass passed, $fail failed"
[ $fail = 0 ]
