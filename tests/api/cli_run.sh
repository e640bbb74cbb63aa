#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# `sb run` and `sb perplexity` with a llama.cpp user's habits, on the embedded model: -s/--seed
# (decimal, -1 = random, printed with -v, reproducible), --system only with --chat, -e escapes on by
# default, -f FILE / -f - with a size cap and clear messages, llama-cli's common flags (implemented,
# or accepted with one warning line), -cnv pointing to sb chat, one-line usage errors (exit 2),
# --help on stdout (exit 0), -ngl N without a GPU falling back to the CPU, --parse-special off by
# default, --ignore-eos, and llama-perplexity's "[1]x,[2]y," / "Final estimate: PPL = X +/- Y" lines
# with NaN an error.
. "$(dirname "$0")/../cli_lib.sh"
src=$(cd "$(dirname "$0")/../.." && pwd)
emb="$src/models/sonicboom-kjv-13m-q8_0.gguf"
P="In the beginning"

# run CMD...: stdout in $tmp/out, stderr in $tmp/err, status in $rc
run() { "$@" > "$tmp/out" 2> "$tmp/err"; rc=$?; }
# usage_error LABEL CMD...: exit 2, exactly one stderr line, which contains $want
usage_error() {
    label=$1
    shift
    run "$@"
    [ $rc = 2 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -qF -- "$want" "$tmp/err" && ok || bad "$label: rc=$rc $(cat "$tmp/err")"
}

# ---- seeds ----
"$sb" run -p "$P" -n 8 -s 42 > "$tmp/a" 2> /dev/null && "$sb" run -p "$P" -n 8 --seed 42 > "$tmp/b" 2> /dev/null
[ $? = 0 ] && cmp -s "$tmp/a" "$tmp/b" && ok || bad "-s 42 and --seed 42 differ: $(cat "$tmp/a") / $(cat "$tmp/b")"
"$sb" run -p "$P" -n 8 -s 43 > "$tmp/c" 2> /dev/null
cmp -s "$tmp/a" "$tmp/c" && bad "-s 42 and -s 43 gave the same text" || ok
"$sb" run -p "$P" -n 8 --seed 010 > "$tmp/a" 2> /dev/null && "$sb" run -p "$P" -n 8 --seed 10 > "$tmp/b" 2> /dev/null
cmp -s "$tmp/a" "$tmp/b" && ok || bad "--seed 010 is not decimal 10"
run "$sb" run -p "$P" -n 8 -v
s1=$(sed -n 's/^seed: \([0-9]*\)$/\1/p' "$tmp/err")
cp "$tmp/out" "$tmp/random1"
run "$sb" run -p "$P" -n 8 -v --seed -1
s2=$(sed -n 's/^seed: \([0-9]*\)$/\1/p' "$tmp/err")
[ -n "$s1" ] && [ -n "$s2" ] && [ "$s1" != "$s2" ] && ok || bad "random seeds printed with -v: '$s1' '$s2'"
"$sb" run -p "$P" -n 8 -s "$s1" > "$tmp/b" 2> /dev/null
cmp -s "$tmp/random1" "$tmp/b" && ok || bad "the printed random seed does not reproduce the text"
run "$sb" run -p "$P" -n 2 -s 7
grep -q '^seed:' "$tmp/err" && bad "seed printed without -v" || ok
want="expected -1 (random) or a decimal integer" usage_error "--seed abc" "$sb" run -p x --seed abc
want="expected -1 (random) or a decimal integer" usage_error "--seed -2" "$sb" run -p x --seed -2
want="expected -1 (random) or a decimal integer" usage_error "--seed 2^64" "$sb" run -p x --seed 18446744073709551616
want="expected -1 (random) or a decimal integer" usage_error "--seed 0x10" "$sb" run -p x -s 0x10
want="option -s needs a value" usage_error "-s without a value" "$sb" run -p x -s

# ---- --system without --chat: one warning, still runs ----
run "$sb" run -p "$P" -n 2 --system "Be brief."
[ $rc = 0 ] && grep -q '^sb run: warning: --system is used only with --chat; ignored$' "$tmp/err" && ok || bad "--system without --chat: rc=$rc $(cat "$tmp/err")"
run "$sb" run -p "$P" -n 2 -s 1 --chat --system "Be brief."
[ $rc = 0 ] && ! grep -q 'warning' "$tmp/err" && ok || bad "--chat --system: rc=$rc $(cat "$tmp/err")"

# ---- escapes (on by default) and the prompt echo ----
run "$sb" run -p 'In the\nbeginning\x41\t|' -n 1 -s 1
[ $rc = 0 ] && [ "$(sed -n 1p "$tmp/out")" = "In the" ] && sed -n 2p "$tmp/out" | grep -q "^beginningA	|" && ok || bad "escapes: $(cat "$tmp/out")"
run "$sb" run -p 'In the\nbeginning' -n 1 -s 1 -e
[ "$(sed -n 1p "$tmp/out")" = "In the" ] && ok || bad "-e: $(cat "$tmp/out")"
run "$sb" run -p 'In the\nbeginning' -n 1 -s 1 --no-escape
grep -qF 'In the\nbeginning' "$tmp/out" && ok || bad "--no-escape: $(cat "$tmp/out")"
run "$sb" run -p 'a\qb\\c\x4' -n 1 -s 1
grep -qF 'a\qb\c\x4' "$tmp/out" && ok || bad "unknown escapes kept: $(cat "$tmp/out")"
run "$sb" run -p "$P" -n 4 -s 1 --no-display-prompt
[ $rc = 0 ] && ! grep -q "^$P" "$tmp/out" && [ -s "$tmp/out" ] && ok || bad "--no-display-prompt: $(cat "$tmp/out")"
run "$sb" run -p "$P" -n 2 -s 1 --color
esc=$(printf '\033')
grep -q "^${esc}\[32m$P${esc}\[0m" "$tmp/out" && ok || bad "--color: $(od -c "$tmp/out" | head -2)"
run "$sb" run -p "$P" -n 2 -s 1 --color off
grep -q "$esc" "$tmp/out" && bad "--color off printed escapes" || ok
run "$sb" run -p "$P" -n 2 -s 1 --log-disable
[ $rc = 0 ] && [ ! -s "$tmp/err" ] && grep -q "^$P" "$tmp/out" && ok || bad "--log-disable: rc=$rc $(cat "$tmp/err")"

# ---- -f FILE, -f -, caps and clear messages ----
printf '%s' "$P" > "$tmp/prompt.txt"
"$sb" run -p "$P" -n 6 -s 5 > "$tmp/a" 2> /dev/null
"$sb" run -f "$tmp/prompt.txt" -n 6 -s 5 > "$tmp/b" 2> /dev/null
cmp -s "$tmp/a" "$tmp/b" && ok || bad "-f FILE differs from -p: $(cat "$tmp/b")"
printf '%s' "$P" | "$sb" run -f - -n 6 -s 5 > "$tmp/b" 2> /dev/null
cmp -s "$tmp/a" "$tmp/b" && ok || bad "-f - from a pipe differs from -p: $(cat "$tmp/b")"
printf 'a\\nb' > "$tmp/esc.txt"
run "$sb" run -f "$tmp/esc.txt" -n 1 -s 1
grep -qF 'a\nb' "$tmp/out" && ok || bad "-f text is taken as is: $(cat "$tmp/out")"
run timeout 20 "$sb" run -f /dev/zero -n 1
[ $rc = 1 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -q '^error: SB_ERR_IO: /dev/zero: is a character device, not a regular file or pipe' "$tmp/err" && ok || bad "-f /dev/zero: rc=$rc $(cat "$tmp/err")"
truncate -s 65M "$tmp/big.txt"
run "$sb" run -f "$tmp/big.txt" -n 1
[ $rc = 1 ] && grep -q '^error: SB_ERR_TEXT_TOO_LONG: .*big.txt: 68157440 bytes, more than the 64 MiB' "$tmp/err" && ok || bad "65 MiB file: rc=$rc $(cat "$tmp/err")"
run "$sb" run -f "$tmp" -n 1
[ $rc = 1 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -q "^error: SB_ERR_IO: $tmp: is a directory, not a text file$" "$tmp/err" && ok || bad "-f DIR: rc=$rc $(cat "$tmp/err")"
run "$sb" run -f "$tmp/missing.txt" -n 1
[ $rc = 1 ] && grep -q "^error: SB_ERR_IO: $tmp/missing.txt: No such file or directory$" "$tmp/err" && ok || bad "-f missing: rc=$rc $(cat "$tmp/err")"
want="give exactly one of -p PROMPT or -f FILE" usage_error "no prompt" "$sb" run -n 1
want="give exactly one of -p PROMPT or -f FILE" usage_error "-p and -f" "$sb" run -p x -f "$tmp/prompt.txt"

# ---- llama-cli's common flags ----
"$sb" run -p "$P" -n 16 -s 3 --temp 0 > "$tmp/a" 2> /dev/null
word=$(sed "s/^$P//" "$tmp/a" | tr -s ' \n' '\n\n' | sed -n 4p)
run "$sb" run -p "$P" -n 16 -s 3 --temp 0 -r "$word"
[ $rc = 0 ] && [ -n "$word" ] && ! sed "s/^$P//" "$tmp/out" | grep -qF "$word" && grep -q 'stop: stop string' "$tmp/err" && ok || bad "-r '$word': $(cat "$tmp/out") $(cat "$tmp/err")"
run "$sb" run -p "$P" -n 16 -s 3 --temp 0 --reverse-prompt "$word"
grep -q 'stop: stop string' "$tmp/err" && ok || bad "--reverse-prompt: $(cat "$tmp/err")"
run "$sb" run -p "$P" -n 2 -s 1 -no-cnv
[ $rc = 0 ] && ! grep -q -i "warning\|no-cnv" "$tmp/err" && ok || bad "-no-cnv: rc=$rc $(cat "$tmp/err")"
want="sb chat" usage_error "-cnv" "$sb" run -p x -cnv
want="sb chat" usage_error "--conversation" "$sb" run -p x --conversation
for fa in "-fa" "-fa on" "-fa auto" "--flash-attn on"; do
    run "$sb" run -p "$P" -n 2 -s 1 $fa
    [ $rc = 0 ] && ! grep -q warning "$tmp/err" && ok || bad "$fa: rc=$rc $(cat "$tmp/err")"
done
run "$sb" run -p "$P" -n 2 -s 1 -fa off
[ $rc = 0 ] && grep -q '^sb run: warning: -fa off ignored' "$tmp/err" && ok || bad "-fa off: rc=$rc $(cat "$tmp/err")"
"$sb" run -p "$P" -n 6 -s 2 --kv-type f16 > "$tmp/a" 2> /dev/null
run "$sb" run -p "$P" -n 6 -s 2 -ctk f16 -ctv f16
[ $rc = 0 ] && cmp -s "$tmp/a" "$tmp/out" && ok || bad "-ctk f16 -ctv f16: rc=$rc $(cat "$tmp/err")"
want="-ctk 'q8_0': the KV cache here is f32 or f16" usage_error "-ctk q8_0" "$sb" run -p x -ctk q8_0
want="K and V share one cache type here" usage_error "-ctk f16 -ctv f32" "$sb" run -p x -ctk f16 -ctv f32
run "$sb" run -p "$P" -n 2 -s 1 -b 128 -ub 64
[ $rc = 0 ] && ok || bad "-b -ub: rc=$rc $(cat "$tmp/err")"
want="-ub '0': out of range" usage_error "-ub 0" "$sb" run -p x -ub 0
run "$sb" run -p "$P" -n 2 -s 1 --chat-template chatml
[ $rc = 0 ] && grep -q 'warning: --chat-template is used only with --chat' "$tmp/err" && ok || bad "--chat-template without --chat: $(cat "$tmp/err")"
run "$sb" run -p "$P" -n 2 -s 1 --mlock -tb 2 --no-mmap -sm layer
[ $rc = 0 ] && grep -q '^sb run: warning: --mlock ignored: ' "$tmp/err" && grep -q '^sb run: warning: -tb ignored: ' "$tmp/err" &&
    grep -q '^sb run: warning: -sm ignored: ' "$tmp/err" && ok || bad "ignored flags: rc=$rc $(cat "$tmp/err")"
want="option -tb needs a value" usage_error "-tb without a value" "$sb" run -p x -tb
want="unknown option '--bogus' (see sb run --help)" usage_error "unknown option" "$sb" run -p x --bogus
want="constrained sampling is not supported" usage_error "--grammar" "$sb" run -p x --grammar 'root ::= "a"'
want="option -n needs a value" usage_error "-n without a value" "$sb" run -p x -n
run "$sb" run --help
[ $rc = 0 ] && [ ! -s "$tmp/err" ] && grep -q '^usage: sb run' "$tmp/out" && grep -q -- '-s, --seed N' "$tmp/out" && ok || bad "--help: rc=$rc"

# ---- -ngl N without a usable GPU: a warning, then the CPU ----
if "$sb" version | grep -q '^cuda: [0-9]* device'; then
    echo "SKIP: a GPU is usable here; -ngl fallback not exercised"
else
    run "$sb" run -p "$P" -n 4 -ngl 99 -v
    [ $rc = 0 ] && grep -q "^$P" "$tmp/out" && grep -q '^sb run: warning: -ngl 99: no usable GPU (.*); running on the CPU$' "$tmp/err" &&
        grep -q '^device: cpu$' "$tmp/err" && ok || bad "-ngl 99 without a GPU: rc=$rc $(cat "$tmp/err")"
fi

# ---- --parse-special: off for a raw prompt ----
run "$sb" run -p "a</s>b" -n 1 -s 1
n_plain=$(sed -n 's/^prompt: \([0-9]*\) tokens.*/\1/p' "$tmp/err")
run "$sb" run -p "a</s>b" -n 1 -s 1 --parse-special
n_special=$(sed -n 's/^prompt: \([0-9]*\) tokens.*/\1/p' "$tmp/err")
[ "$n_plain" = 7 ] && [ "$n_special" = 4 ] && ok || bad "parse-special: '$n_plain' tokens as text, '$n_special' with the flag (want 7 and 4)"

# ---- --ignore-eos (the shared random-weight llama model ends with EOS at seed 4) ----
tl="$data/models/test-llama-q8_0.gguf"
if [ -f "$tl" ]; then
    run "$sb" run -m "$tl" -p a -n 100 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 -s 4
    grep -q 'stop: end of generation' "$tmp/err" && ok || bad "seed 4 no longer ends with EOS: $(cat "$tmp/err")"
    run "$sb" run -m "$tl" -p a -n 100 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 -s 4 --ignore-eos
    [ $rc = 0 ] && grep -q 'generated: 100 tokens.*stop: length' "$tmp/err" && ok || bad "--ignore-eos: rc=$rc $(cat "$tmp/err")"
else
    echo "SKIP: shared test models absent; --ignore-eos not exercised"
fi

# ---- sb perplexity: llama-perplexity's lines ----
head -c 20000 "$src/tests/data/embedded-heldout.txt" > "$tmp/held.txt"
run "$sb" perplexity -f "$tmp/held.txt" -c 64 --chunks 3
[ $rc = 0 ] && grep -Eq '^\[1\][0-9]+\.[0-9]{4},\[2\][0-9]+\.[0-9]{4},\[3\][0-9]+\.[0-9]{4},$' "$tmp/out" &&
    grep -Eq '^Final estimate: PPL = [0-9]+\.[0-9]{4} \+/- [0-9]+\.[0-9]{5}$' "$tmp/out" && ok || bad "perplexity lines: rc=$rc $(cat "$tmp/out" "$tmp/err")"
last=$(sed -n 's/.*\[3\]\([0-9.]*\),$/\1/p' "$tmp/out")
grep -q "^Final estimate: PPL = $last " "$tmp/out" && ok || bad "final PPL is not the last running value ($last)"
"$sb" perplexity -f - -c 64 --chunks 3 < "$tmp/held.txt" > "$tmp/b" 2> /dev/null
cmp -s "$tmp/out" "$tmp/b" && ok || bad "perplexity -f - differs from -f FILE"
want="-f TEXTFILE is required" usage_error "perplexity without -f" "$sb" perplexity
want="unknown option '--bogus'" usage_error "perplexity unknown option" "$sb" perplexity -f "$tmp/held.txt" --bogus
run "$sb" perplexity --help
[ $rc = 0 ] && grep -q '^usage: sb perplexity' "$tmp/out" && ok || bad "perplexity --help: rc=$rc"
run "$sb" perplexity -f "$tmp" -c 64
[ $rc = 1 ] && grep -q "is a directory" "$tmp/err" && ok || bad "perplexity -f DIR: rc=$rc $(cat "$tmp/err")"
# a model whose output norm is NaN: an error, not "nan +/- nan"
cp "$emb" "$tmp/nan.gguf"
data_at=$("$sb" info "$emb" | sed -n 's/.*(data at \(0x[0-9a-f]*\)).*/\1/p')
norm_at=$("$sb" info "$emb" | awk '$2 == "output_norm.weight" { print $(NF - 1) }')
head -c 1536 /dev/zero | tr '\000' '\377' | dd of="$tmp/nan.gguf" bs=1 seek=$((data_at + norm_at)) conv=notrunc 2> /dev/null
run "$sb" perplexity -m "$tmp/nan.gguf" -f "$tmp/held.txt" -c 64 --chunks 2
[ $rc = 1 ] && [ "$(grep -c '^error: SB_ERR_' "$tmp/err")" = 1 ] && ! grep -qi 'nan +/-' "$tmp/out" && ! grep -q 'Final estimate' "$tmp/out" &&
    ok || bad "perplexity on NaN logits: rc=$rc $(cat "$tmp/out" "$tmp/err")"
finish
