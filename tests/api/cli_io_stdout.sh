#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# Every command that prints to stdout exits 1 with exactly one line
# "error: SB_ERR_IO: standard output: No space left on device" when stdout is /dev/full, and a
# closed stdout is an error too; `sb run` stops generating at the first failed write.
. "$(dirname "$0")/../cli_lib.sh"
. "$(dirname "$0")/io_lib.sh"
m="$data/models/test-llama-q8_0.gguf" ref="$data/models/test-llama-q8_0.ref"
if [ ! -f "$m" ] || [ ! -f "$ref" ]; then echo "SKIP: shared test models absent"; exit 77; fi
[ -c /dev/full ] || { echo "SKIP: no /dev/full"; exit 77; }
watch_begin
full="error: SB_ERR_IO: standard output: " # the reason (ENOSPC) where the stream still knows it
printf 'In the beginning God created the heaven and the earth. And the earth was without form, and void.\n' > "$tmp/t.txt"
to_full() { label=$1; shift; expect_err 1 "$label > /dev/full" "$full" sh -c '"$@" > /dev/full' sh "$@"; }
to_full version "$sb" version
to_full "--help" "$sb" --help
to_full "run --help" "$sb" run --help
to_full info "$sb" info "$m"
to_full "info --json" "$sb" info --json "$m"
to_full tokenize "$sb" tokenize -m "$m" -p hello
to_full "tokenize --pieces" "$sb" tokenize -m "$m" -f "$tmp/t.txt" --pieces
to_full run "$sb" run -m "$m" -p hi -n 4
to_full logits "$sb" logits -m "$m" --ref "$ref" -o "$tmp/o.ref"
# perplexity reports progress on stderr, so here the error is its last line
sh -c '"$@" > /dev/full' sh "$sb" perplexity -m "$m" -f "$tmp/t.txt" -c 8 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && tail -n 1 "$tmp/err" | grep -qF "$full" && [ "$(grep -c error: "$tmp/err")" = 1 ] && ok || bad "perplexity > /dev/full: rc=$rc $(cat "$tmp/err")"
to_full bench "$sb" bench -m "$m" -p 8 -n 2 -r 1
to_full "bench -o json" "$sb" bench -m "$m" -p 8 -n 2 -r 1 -o json
to_full quantize "$sb" quantize --help
to_full synth "$sb" synth --help
# a long generation into /dev/full stops at once instead of running to the end
start=$(date +%s)
expect_err 1 "run -n 100000 > /dev/full stops" "$full" sh -c '"$@" > /dev/full' sh "$sb" run -m "$m" -p hi -n 100000 -c 4096
[ $(( $(date +%s) - start )) -lt 20 ] && ok || bad "run > /dev/full took $(( $(date +%s) - start )) s"
# stdout closed
expect_err 1 "version >&-" "error: SB_ERR_IO: standard output: Bad file descriptor" sh -c '"$@" >&-' sh "$sb" version
# still 0 when stdout works
expect_ok "version to a file" "$sb" version
watch_end
finish
