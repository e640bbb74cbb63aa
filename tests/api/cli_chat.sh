#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# `sb chat` on a terminal, driven through tmux (send-keys, capture-pane): a turn with the embedded
# model (greedy) shows the same answer as `sb run --chat`; /reset, /help and /exit answer; the exit
# status is 0. On a tiny synth model with Qwen2's vocabulary whose greedy answer runs for thousands
# of tokens (random weights never pick an end token there), Ctrl-C stops the answer (the per-turn
# line says "stopped"), the program is back at its prompt and still takes commands; two Ctrl-C at
# the prompt quit with status 0. Every wait is a bounded loop. Needs tmux (scripts/deps/test.txt).
. "$(dirname "$0")/../cli_lib.sh"
if ! command -v tmux > /dev/null; then
    bad "tmux is not installed (scripts/deps/test.txt lists it)"
    finish
    exit $?
fi
sock="$tmp/tmux.sock"
t() { tmux -S "$sock" "$@"; }
pane() { t capture-pane -p -J -S -200 -t chat 2> /dev/null; }
# wait_for PATTERN [tenths]: until the pane (or the file $tmp/rc after exit) shows PATTERN
wait_for() {
    n=${2:-300}
    while [ "$n" -gt 0 ]; do
        pane | grep -q -e "$1" && return 0
        sleep 0.1
        n=$((n - 1))
    done
    return 1
}
wait_exit() {
    n=300
    while [ "$n" -gt 0 ] && [ ! -s "$tmp/rc" ]; do sleep 0.1; n=$((n - 1)); done
    cat "$tmp/rc" 2> /dev/null
}
last_line_is_prompt() { pane | grep -v '^ *$' | tail -1 | grep -q '^> *$'; }

# ---- embedded model: one turn, commands, /exit ----
want=$("$sb" run --chat -p "Who begat Enos?" -n 12 --temp 0 --device cpu 2> /dev/null | head -1)
t new-session -d -s chat -x 200 -y 50 "'$sb' chat -n 12 --temp 0 --device cpu -v; echo \$? > '$tmp/rc'"
wait_for '^> *$' && ok || bad "no prompt: $(pane | tail -3)"
t send-keys -t chat "Who begat Enos?" Enter
wait_for "^$want\$" && ok || bad "answer: want '$want', pane: $(pane | tail -4)"
wait_for '^> *$' && last_line_is_prompt && ok || bad "no prompt after the answer: $(pane | tail -3)"
t send-keys -t chat "/help" Enter
wait_for '^/reset ' && ok || bad "/help: $(pane | tail -3)"
t send-keys -t chat "/reset" Enter
wait_for '(new conversation)' && ok || bad "/reset: $(pane | tail -3)"
t send-keys -t chat "Who begat Enos?" Enter
n=0
while [ $n -lt 100 ] && [ "$(pane | grep -c "^$want\$")" -lt 2 ]; do sleep 0.1; n=$((n + 1)); done
[ "$(pane | grep -c "^$want\$")" = 2 ] && ok || bad "second answer after /reset: $(pane | tail -4)"
# the same prompt again: all but its last token come from the KV cache
wait_for '^\[prompt 39 tokens, 38 reused' && ok || bad "prefix reuse after /reset: $(pane | grep '^\[prompt')"
t send-keys -t chat "/exit" Enter
rc=$(wait_exit)
[ "$rc" = 0 ] && ok || bad "/exit: status '$rc'"

# ---- Ctrl-C during a long answer ----
q="$data/vocab/ggml-vocab-qwen2.gguf"
if [ -f "$q" ]; then
    "$sb" synth --preset tiny-qwen2 --vocab "$q" --type Q8_0 --fast -o "$tmp/m.gguf" 2> /dev/null || bad "synth"
    rm -f "$tmp/rc"
    t new-session -d -s chat -x 200 -y 50 "'$sb' chat -m '$tmp/m.gguf' -n -1 -c 4096 -t 1 --temp 0 --device cpu -v; echo \$? > '$tmp/rc'"
    wait_for '^> *$' && ok || bad "synth model: no prompt: $(pane | tail -3)"
    t send-keys -t chat "hello" Enter
    sleep 1
    t send-keys -t chat C-c
    wait_for '^> *$' 100 && last_line_is_prompt && ok || bad "Ctrl-C did not bring the prompt back: $(pane | tail -3)"
    pane | grep -q 'answer [0-9]* tokens in .*, stopped\]' && ok || bad "answer not stopped: $(pane | tail -3)"
    [ ! -s "$tmp/rc" ] && ok || bad "the program ended on Ctrl-C (status $(cat "$tmp/rc"))"
    t send-keys -t chat "/reset" Enter
    wait_for '(new conversation)' && ok || bad "no command taken after Ctrl-C: $(pane | tail -3)"
    t send-keys -t chat C-c
    wait_for 'Ctrl-C again' && ok || bad "first Ctrl-C at the prompt: $(pane | tail -3)"
    t send-keys -t chat C-c
    rc=$(wait_exit)
    [ "$rc" = 0 ] && ok || bad "two Ctrl-C at the prompt: status '$rc'"
else
    echo "SKIP Ctrl-C part: shared vocab files absent"
fi
t kill-server 2> /dev/null
finish
