#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# `sb info` on every shared GGUF file (exit 0, JSON parses), and its exit statuses: 1 with one
# "error: STATUS: detail" line for bad files, 2 for usage errors.
. "$(dirname "$0")/../cli_lib.sh"
for f in "$data"/models/*.gguf "$data"/vocab/*.gguf; do
    [ -f "$f" ] || continue
    if "$sb" info "$f" > "$tmp/out" 2>&1 && grep -q '^totals:' "$tmp/out"; then ok; else bad "sb info $f"; fi
    if "$sb" info --json "$f" > "$tmp/out.json" && python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/out.json" 2>/dev/null; then ok
    elif ! command -v python3 >/dev/null; then ok; else bad "sb info --json $f: invalid JSON"; fi
done
printf 'GGUX' > "$tmp/bad.gguf"
"$sb" info "$tmp/bad.gguf" > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -q '^error: SB_ERR_FORMAT_' "$tmp/err" && ok || bad "bad magic: rc=$rc $(cat "$tmp/err")"
"$sb" info "$tmp/missing.gguf" > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && grep -q '^error: SB_ERR_IO: ' "$tmp/err" && ok || bad "missing file: rc=$rc"
expect_rc 2 "no args" "$sb" info
expect_rc 2 "bad option" "$sb" info --bogus x
expect_rc 2 "unknown command" "$sb" nosuchcommand
finish
