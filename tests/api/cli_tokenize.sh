#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# `sb tokenize`: ids on one line, --pieces lines (escaped), -f input, special-token flags, and its
# exit statuses (1 + one "error: STATUS: detail" line for bad files, 2 for usage errors).
. "$(dirname "$0")/../cli_lib.sh"
q="$data/vocab/ggml-vocab-qwen2.gguf"
s="$data/vocab/ggml-vocab-llama-spm.gguf"
if [ -f "$q" ] && [ -f "$s" ]; then
    out=$("$sb" tokenize -m "$q" -p "Hello world")
    [ "$out" = "9707 1879" ] && ok || bad "ids: '$out'"
    "$sb" tokenize -m "$q" -p "Hello world" --pieces > "$tmp/p"
    printf '9707\tHello\n1879\t world\n' | cmp -s - "$tmp/p" && ok || bad "pieces: $(cat "$tmp/p")"
    printf 'a\nb' > "$tmp/in.txt"
    "$sb" tokenize -m "$q" -f "$tmp/in.txt" --pieces > "$tmp/p"
    printf '64\ta\n198\t\\n\n65\tb\n' | cmp -s - "$tmp/p" && ok || bad "-f pieces: $(cat "$tmp/p")"
    out=$("$sb" tokenize -m "$q" -p "<|im_start|>")
    [ "$out" = "27 91 318 4906 91 29" ] && ok || bad "no parse-special: '$out'"
    out=$("$sb" tokenize -m "$q" -p "<|im_start|>" --parse-special)
    [ "$out" = "151644" ] && ok || bad "parse-special: '$out'"
    out=$("$sb" tokenize -m "$s" -p "Hello" --add-special)
    [ "$out" = "1 15043" ] && ok || bad "add-special (spm bos): '$out'"
    out=$("$sb" tokenize -m "$s" -p "")
    [ "$out" = "" ] && ok || bad "empty text: '$out'"
else
    echo "SKIP: shared vocab files absent"
fi
printf 'GGUF\003\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' > "$tmp/novocab.gguf"
"$sb" tokenize -m "$tmp/novocab.gguf" -p x > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -q '^error: SB_ERR_VOCAB: ' "$tmp/err" && ok || bad "no vocab: rc=$rc $(cat "$tmp/err")"
"$sb" tokenize -m "$tmp/missing.gguf" -p x > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && grep -q '^error: SB_ERR_IO: ' "$tmp/err" && ok || bad "missing file: rc=$rc"
expect_rc 2 "no -m" "$sb" tokenize -p x
expect_rc 2 "no text" "$sb" tokenize -m "$tmp/novocab.gguf"
expect_rc 2 "-p and -f" "$sb" tokenize -m x -p a -f b
expect_rc 2 "bad option" "$sb" tokenize -m x -p a --bogus
expect_rc 1 "missing -f" "$sb" tokenize -m "$tmp/novocab.gguf" -f "$tmp/nofile"
finish
