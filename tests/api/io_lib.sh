# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# tests/api/io_lib.sh — what the I/O hostile-input scripts share; sourced after cli_lib.sh.
#   expect_err RC "label" "text" cmd...   cmd (30 s at most: a hang fails) exits RC and writes
#                                         exactly one line to stderr, which contains text
#   expect_ok "label" cmd...              cmd exits 0 (stdout in $tmp/out)
#   watch_begin / watch_end               nothing outside $tmp changed in between: the shared model
#                                         folder and the device nodes are as they were, and no
#                                         temporary or scratch file is left anywhere we write
watched="$data/models"
[ -d "$watched" ] || watched=$tmp

expect_err() {
    io_want=$1 io_label=$2 io_text=$3 # io_ names: callers' variables stay theirs
    shift 3
    timeout 30 "$@" > "$tmp/out" 2> "$tmp/err"; rc=$?
    io_lines=$(grep -cv '^loaded ' "$tmp/err") # a model load's one summary line may precede the error
    if [ "$rc" = "$io_want" ] && [ "$io_lines" = 1 ] && grep -qF -- "$io_text" "$tmp/err"; then ok
    else bad "$io_label: rc=$rc (want $io_want), $io_lines stderr line(s): $(head -c 400 "$tmp/err")"; fi
}

expect_ok() {
    io_label=$1
    shift
    timeout 60 "$@" > "$tmp/out" 2> "$tmp/err"; rc=$?
    [ "$rc" = 0 ] && ok || bad "$io_label: rc=$rc $(head -c 400 "$tmp/err")"
}

state() {
    ls -la --time-style=+%s "$watched" 2>&1
    stat -c '%n %F %t:%T' /dev/null /dev/full /dev/zero 2>&1
    find "$tmp" "$watched" -name '*.tmp.*' -o -name '*.scratch.*' 2>/dev/null
}
watch_begin() { state > "$tmp/.state0"; }
watch_end() {
    state > "$tmp/.state1"
    cmp -s "$tmp/.state0" "$tmp/.state1" && ok || bad "something outside the test changed: $(diff "$tmp/.state0" "$tmp/.state1" | head -5)"
}
