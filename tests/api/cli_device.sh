#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# `sb run` / `sb bench` / `sb perplexity` device choice on the embedded model: --device auto (the default) runs where
# `-v` says — the CPU when no GPU can take the model (CI: it says why), the GPU otherwise; --device
# cpu and -ngl 0 the CPU; --device cuda without a usable GPU is SB_ERR_DEVICE (SB_ERR_UNSUPPORTED in a
# build without the CUDA backend; exit 1); any other
# --device value is a usage error (exit 2).
. "$(dirname "$0")/../cli_lib.sh"
gpu=yes
"$sb" version | grep -q '^cuda: [0-9]* device' || gpu=no
"$sb" run -p "In the beginning" -n 4 -v > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && grep -q '^In the beginning' "$tmp/out" && ok || bad "default device: rc=$rc $(cat "$tmp/err")"
if [ $gpu = no ]; then
    grep -q '^device: cpu$' "$tmp/err" && grep -q 'device auto: the CPU (' "$tmp/err" && ok || bad "auto without a GPU: $(cat "$tmp/err")"
    want=SB_ERR_DEVICE # a CUDA build without a usable device; a build without the backend refuses it as such
    "$sb" version | grep -q '^cuda: not compiled in' && want=SB_ERR_UNSUPPORTED
    "$sb" run -p "In the beginning" -n 4 --device cuda > /dev/null 2> "$tmp/err"; rc=$?
    [ $rc = 1 ] && grep -q "^error: $want: " "$tmp/err" && ok || bad "--device cuda without a GPU: rc=$rc $(cat "$tmp/err")"
    "$sb" bench -p 8 -n 2 -r 1 > "$tmp/bench" 2>&1; rc=$?
    [ $rc = 0 ] && grep -q '| CPU  *|' "$tmp/bench" && ok || bad "bench default without a GPU: rc=$rc $(cat "$tmp/bench")"
else
    grep -q '^device: cuda' "$tmp/err" && ok || bad "auto with a GPU: $(cat "$tmp/err")"
fi
"$sb" run -p "In the beginning" -n 4 --device cpu -v > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && grep -q '^device: cpu$' "$tmp/err" && ok || bad "--device cpu: rc=$rc"
"$sb" run -p "In the beginning" -n 4 -ngl 0 -v > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && grep -q '^device: cpu$' "$tmp/err" && ok || bad "-ngl 0: rc=$rc"
"$sb" run -p "In the beginning" -n 4 --device auto > /dev/null 2>&1 && ok || bad "--device auto"
# sb perplexity: auto by default too; sb logits (a reference tool): the CPU unless told
awk 'BEGIN { for (i = 0; i < 40; i++) print "In the beginning God created the heaven and the earth." }' > "$tmp/text.txt"
"$sb" perplexity -f "$tmp/text.txt" -c 32 --chunks 1 > "$tmp/ppl" 2>&1 && grep -q 'PPL\|ppl\|perplexity' "$tmp/ppl" && ok || bad "perplexity (auto): $(tail -2 "$tmp/ppl")"
"$sb" perplexity -f "$tmp/text.txt" -c 32 --chunks 1 -ngl 0 > /dev/null 2>&1 && ok || bad "perplexity -ngl 0"
expect_rc 2 "--device bogus (perplexity)" "$sb" perplexity -f "$tmp/text.txt" --device bogus
expect_rc 2 "--device bogus (logits)" "$sb" logits -m x --ref y -o z --device bogus
expect_rc 2 "-ngl -1 (run)" "$sb" run -p x -ngl -1
expect_rc 2 "--device bogus (run)" "$sb" run -p x --device bogus
expect_rc 2 "--device bogus (bench)" "$sb" bench -p 8 -n 2 --device bogus
# the CUDA settings of sb_session_params: accepted (and meaningless) on the CPU, bad values are usage errors
"$sb" run -p "In the beginning" -n 4 --seed 7 --device cpu > "$tmp/ref" 2>/dev/null
"$sb" run -p "In the beginning" -n 4 --seed 7 --device cpu --cuda-graphs off --codegen off --act-type q8_1 > "$tmp/out" 2>/dev/null; rc=$?
[ $rc = 0 ] && cmp -s "$tmp/ref" "$tmp/out" && ok || bad "CUDA settings on the CPU: rc=$rc"
for f in "--cuda-graphs maybe" "--codegen 1" "--act-type q8_0" "--act-type"; do
    "$sb" run -p x -n 1 $f > /dev/null 2> "$tmp/err"; rc=$?
    [ $rc = 2 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -q "^sb run: .*${f%% *}" "$tmp/err" && ok || bad "run $f: rc=$rc $(cat "$tmp/err")"
done
finish
