#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# A model file truncated while `sb run` decodes from its mapping: exit 1 with exactly the line
# "error: SB_ERR_IO: model file FILE was truncated or changed while in use (use --no-mmap to load
# it into memory)" (sb's SIGBUS handler, not a crash); with --no-mmap the run completes (exit 0),
# and a later load of the truncated file fails cleanly. Every wait is bounded. One thread and the
# model's own context (512 for the embedded model) keep the decode running long enough to be cut.
. "$(dirname "$0")/../cli_lib.sh"
src="$(dirname "$0")/../../models/sonicboom-kjv-13m-q8_0.gguf"
[ -f "$src" ] || src="$data/models/test-llama-f32.gguf"
[ -f "$src" ] || { echo "SKIP: no model"; exit 77; }

# wait_for SECONDS CONDITION...: poll every 0.1 s; 1 on timeout
wait_for() {
    n=$(($1 * 10)); shift
    while [ $n -gt 0 ]; do "$@" && return 0; sleep 0.1; n=$((n - 1)); done
    return 1
}
bigger_than() { [ "$(wc -c < "$1")" -gt "$2" ]; }
gone() { ! kill -0 "$1" 2>/dev/null; }

# start_and_truncate N_PREDICT [flags]: run in the background, truncate the copy once tokens stream
start_and_truncate() {
    n=$1; shift
    cp "$src" "$tmp/m.gguf"
    : > "$tmp/out" # empty before the start: the wait below must not see a previous run's output
    prompt="In the beginning"
    # past the embedded model's 512-token trained context, so the run outlasts the truncation
    "$sb" run -m "$tmp/m.gguf" -p "$prompt" -n "$n" -c 4096 --allow-long-context -t 1 --temp 0 "$@" > "$tmp/out" 2> "$tmp/err" &
    pid=$!
    wait_for 60 bigger_than "$tmp/out" $((${#prompt} + 8)) || bad "no tokens streamed within 60 s"
    truncate -s 65536 "$tmp/m.gguf"
    # 240 s: the --no-mmap run decodes to its end, slow under ASan on a loaded 2-core machine
    if wait_for 240 gone $pid; then wait $pid; rc=$?; else kill -9 $pid; rc=timeout; bad "still running 240 s after the truncation"; fi
}

start_and_truncate 4000
msg="error: SB_ERR_IO: model file $tmp/m.gguf was truncated or changed while in use (use --no-mmap to load it into memory)"
# a cut between two evaluations is the session's size check, one inside an evaluation the SIGBUS line
shrank="error: SB_ERR_IO: $tmp/m.gguf: file changed size since it was loaded ($(wc -c < "$src" | tr -d " ") -> 65536 bytes)"
errs=$(grep -v -e "^loaded " -e "^warning: " "$tmp/err")
[ "$rc" = 1 ] && { [ "$errs" = "$msg" ] || [ "$errs" = "$shrank" ]; } && ok || bad "mapped: rc=$rc stderr: $(head -c 600 "$tmp/err")"

start_and_truncate 600 --no-mmap
[ "$rc" = 0 ] && grep -q "generated: [1-9][0-9]* tokens" "$tmp/err" && ok || bad "--no-mmap: rc=$rc stderr: $(head -c 300 "$tmp/err")"

# the truncated file now: refused at load with the format error, one line, exit 1
"$sb" run -m "$tmp/m.gguf" -p hi -n 1 > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -q "^error: SB_ERR_FORMAT" "$tmp/err" && ok || bad "truncated load: rc=$rc $(cat "$tmp/err")"
finish
