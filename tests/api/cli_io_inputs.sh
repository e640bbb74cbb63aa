#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# Input files are looked at before they are read: where a GGUF or reference file is meant, a FIFO,
# directory or device is refused at once (no hang: each command has 30 s); text files (-f) may be
# regular files or pipes up to 256 MiB, and a directory says "is a directory", /dev/zero is refused
# (no unbounded memory), a file over the cap says "larger than the 256 MiB limit" before reading.
. "$(dirname "$0")/../cli_lib.sh"
. "$(dirname "$0")/io_lib.sh"
m="$data/models/test-llama-q8_0.gguf" ref="$data/models/test-llama-q8_0.ref"
if [ ! -f "$m" ] || [ ! -f "$ref" ]; then echo "SKIP: shared test models absent"; exit 77; fi
watch_begin
mkfifo "$tmp/fifo"
mkdir "$tmp/dir"
fifo="is a FIFO, not a regular file"
for what in fifo dir; do
    p="$tmp/$what"
    [ $what = fifo ] && why=$fifo || why="$p: is a directory"
    expect_err 1 "info $what" "error: SB_ERR_IO: $p: ${why#$p: }" "$sb" info "$p"
    expect_err 1 "run -m $what" "$why" "$sb" run -m "$p" -p hi -n 1
    expect_err 1 "tokenize -m $what" "$why" "$sb" tokenize -m "$p" -p hi
    expect_err 1 "quantize $what" "$why" "$sb" quantize "$p" "$tmp/q.gguf" Q8_0
    expect_err 1 "perplexity -m $what" "$why" "$sb" perplexity -m "$p" -f "$ref"
    expect_err 1 "logits -m $what" "$why" "$sb" logits -m "$p" --ref "$ref" -o "$tmp/o.ref"
    expect_err 1 "logits --ref $what" "$why" "$sb" logits -m "$m" --ref "$p" -o "$tmp/o.ref"
    expect_err 1 "bench -m $what" "$why" "$sb" bench -m "$p" -p 8 -n 1 -r 1
done
expect_err 1 "info /dev/zero" "/dev/zero: is a character device, not a regular file" "$sb" info /dev/zero
expect_err 1 "run -m /dev/null" "/dev/null: is a character device, not a regular file" "$sb" run -m /dev/null -p hi

# text files
for cmd in "run -m $m -n 1" "tokenize -m $m" "perplexity -m $m"; do
    c=${cmd%% *}
    # shellcheck disable=SC2086
    expect_err 1 "$c -f dir" "error: SB_ERR_IO: $tmp/dir: is a directory" "$sb" $cmd -f "$tmp/dir"
    # shellcheck disable=SC2086
    expect_err 1 "$c -f /dev/zero" "/dev/zero: is a character device, not a regular file or pipe" "$sb" $cmd -f /dev/zero
    # shellcheck disable=SC2086
    expect_err 1 "$c -f missing" "$tmp/missing.txt: No such file or directory" "$sb" $cmd -f "$tmp/missing.txt"
done
truncate -s 257M "$tmp/big.txt"
expect_err 1 "tokenize -f 257 MiB" "error: SB_ERR_IO: $tmp/big.txt: larger than the 256 MiB limit" "$sb" tokenize -m "$m" -f "$tmp/big.txt"
expect_err 1 "run -f 257 MiB" "$tmp/big.txt: 269484032 bytes, more than the 64 MiB a text input may hold" "$sb" run -m "$m" -f "$tmp/big.txt" -n 1
rm -f "$tmp/big.txt"
# a pipe larger than the cap is cut off at the cap, not read to the end (head ends when sb stops)
expect_err 1 "tokenize -f pipe over the cap" "larger than the 256 MiB limit" sh -c "head -c 300000000 /dev/zero | \"\$0\" tokenize -m \"\$1\" -f /dev/stdin" "$sb" "$m"
# a pipe within the cap and a FIFO with a writer are text input
expect_ok "tokenize -f pipe" sh -c "printf 'In the beginning' | \"\$0\" tokenize -m \"\$1\" -f /dev/stdin" "$sb" "$m"
want=$("$sb" tokenize -m "$m" -p "In the beginning")
[ -n "$want" ] && [ "$(cat "$tmp/out")" = "$want" ] && ok || bad "tokenize -f pipe: '$(cat "$tmp/out")' vs '$want'"
expect_err 1 "tokenize -f fifo, no writer" "error: SB_ERR_IO: $tmp/fifo: a FIFO that no process writes to" "$sb" tokenize -m "$m" -f "$tmp/fifo"
expect_err 1 "run -f fifo, no writer" "a FIFO that no process writes to" "$sb" run -m "$m" -f "$tmp/fifo" -n 1
(printf 'In the beginning' > "$tmp/fifo") & writer=$!
sleep 0.5 # the writer waits in open(): sb's non-blocking open then finds it (a FIFO with no writer reads as empty)
expect_ok "tokenize -f fifo with a writer" "$sb" tokenize -m "$m" -f "$tmp/fifo"
wait $writer
[ "$(cat "$tmp/out")" = "$want" ] && ok || bad "tokenize -f fifo: '$(cat "$tmp/out")' vs '$want'"
watch_end
finish
