#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# Output files are never destructive (sb_output_open's rule, base/file_io.h): `sb logits -o` and
# `sb quantize IN OUT` onto device nodes (made with mknod here, as root), a FIFO, a directory,
# symlinks and regular files. A device node stays a device node, /dev/full-like nodes fail with
# ENOSPC (exit 1, one line), a FIFO nobody reads is refused at once, a directory is refused, a
# regular file is replaced whole (permissions kept), a symlink keeps pointing at its file.
. "$(dirname "$0")/../cli_lib.sh"
. "$(dirname "$0")/io_lib.sh"
m="$data/models/test-llama-q8_0.gguf" ref="$data/models/test-llama-q8_0.ref" f32="$data/models/test-llama-f32.gguf"
if [ ! -f "$m" ] || [ ! -f "$ref" ] || [ ! -f "$f32" ]; then echo "SKIP: shared test models absent"; exit 77; fi
watch_begin
is_chr() { [ -c "$1" ] && [ ! -L "$1" ] && ok || bad "$2: $1 is no longer a character device: $(ls -l "$1")"; }

# device nodes (root only: mknod)
if [ "$(id -u)" = 0 ] && mknod "$tmp/null" c 1 3 2>/dev/null && mknod "$tmp/full" c 1 7; then
    expect_ok "logits -o null" "$sb" logits -m "$m" --ref "$ref" -o "$tmp/null"; is_chr "$tmp/null" "logits -o null"
    expect_err 1 "logits -o full" "error: SB_ERR_IO: $tmp/full: write: No space left on device" "$sb" logits -m "$m" --ref "$ref" -o "$tmp/full"
    is_chr "$tmp/full" "logits -o full"
    expect_ok "quantize to null" "$sb" quantize "$f32" "$tmp/null" Q8_0; is_chr "$tmp/null" "quantize to null"
    expect_err 1 "quantize to full" "No space left on device" "$sb" quantize "$f32" "$tmp/full" Q8_0; is_chr "$tmp/full" "quantize to full"
    ln -s "$tmp/full" "$tmp/link-full"
    expect_err 1 "logits -o symlink to full" "No space left on device" "$sb" logits -m "$m" --ref "$ref" -o "$tmp/link-full"
    is_chr "$tmp/full" "through a symlink"; [ -L "$tmp/link-full" ] && ok || bad "symlink to full replaced"
else
    echo "SKIP: device-node cases (not root, or mknod not permitted)"
fi
expect_ok "logits -o /dev/null" "$sb" logits -m "$m" --ref "$ref" -o /dev/null; is_chr /dev/null "logits -o /dev/null"

# FIFO: refused at once with no reader; streamed to a reader, still a FIFO afterwards
mkfifo "$tmp/fifo"
expect_err 1 "logits -o fifo, no reader" "error: SB_ERR_IO: $tmp/fifo: a FIFO that no process reads" "$sb" logits -m "$m" --ref "$ref" -o "$tmp/fifo"
expect_err 1 "quantize to fifo, no reader" "a FIFO that no process reads" "$sb" quantize "$f32" "$tmp/fifo" Q8_0
timeout 30 cat "$tmp/fifo" > "$tmp/from-fifo" & reader=$!
sleep 0.2
expect_ok "logits -o fifo with a reader" "$sb" logits -m "$m" --ref "$ref" -o "$tmp/fifo"
wait $reader
[ -p "$tmp/fifo" ] && ok || bad "fifo replaced"
[ "$(wc -c < "$tmp/from-fifo")" = "$(wc -c < "$ref")" ] && ok || bad "fifo got $(wc -c < "$tmp/from-fifo") bytes"

# directory, dangling symlink: refused, untouched
mkdir "$tmp/dir"
expect_err 1 "logits -o dir" "error: SB_ERR_IO: $tmp/dir: is a directory (refusing to write over it)" "$sb" logits -m "$m" --ref "$ref" -o "$tmp/dir"
expect_err 1 "quantize to dir" "is a directory (refusing to write over it)" "$sb" quantize "$f32" "$tmp/dir" Q8_0
[ -d "$tmp/dir" ] && [ -z "$(ls -A "$tmp/dir")" ] && ok || bad "dir changed"
ln -s "$tmp/nowhere/x" "$tmp/dangling"
expect_err 1 "logits -o dangling symlink" "is a dangling symbolic link" "$sb" logits -m "$m" --ref "$ref" -o "$tmp/dangling"
[ -L "$tmp/dangling" ] && [ ! -e "$tmp/nowhere" ] && ok || bad "dangling symlink changed"
expect_err 1 "logits -o missing folder" "No such file or directory" "$sb" logits -m "$m" --ref "$ref" -o "$tmp/nowhere/out.ref"

# regular file: replaced whole, permissions kept; a symlink to it stays a symlink
echo old > "$tmp/out.ref"; chmod 640 "$tmp/out.ref"
expect_ok "logits -o regular" "$sb" logits -m "$m" --ref "$ref" -o "$tmp/out.ref"
[ "$(stat -c %a "$tmp/out.ref")" = 640 ] && [ "$(wc -c < "$tmp/out.ref")" = "$(wc -c < "$ref")" ] && ok || bad "regular: $(ls -l "$tmp/out.ref")"
ln -s out.ref "$tmp/link.ref"
echo old > "$tmp/out.ref"
expect_ok "logits -o symlink" "$sb" logits -m "$m" --ref "$ref" -o "$tmp/link.ref"
[ -L "$tmp/link.ref" ] && [ "$(wc -c < "$tmp/out.ref")" = "$(wc -c < "$ref")" ] && ok || bad "symlink: $(ls -l "$tmp/link.ref" "$tmp/out.ref")"
expect_ok "quantize to new file" "$sb" quantize "$f32" "$tmp/new.gguf" Q8_0
expect_ok "quantized file loads" "$sb" info "$tmp/new.gguf"

watch_end
finish
