#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# `sb run --chat` on a gemma4 model (issue 27): tiny-gemma4 synthesized with Gemma 4's real
# vocabulary (its template ends the generation prompt with the empty thought channel) is run with
# --chat: it reports the gemma4 format and (-v) its KV cache per token and resident weight bytes (sb info's,
# the PLE table left out), and its prompt is exactly <bos> + the turn markup
# "<|turn>user\n{text}<turn|>\n<|turn>model\n<|channel>thought\n<channel|>" (and with --system a
# "<|turn>system\n...<turn|>\n" turn first), counted by sb tokenize with --parse-special. A user
# text holding "<turn|>" stays plain text.
. "$(dirname "$0")/../cli_lib.sh"
v="$data/vocab/ggml-vocab-gemma-4.gguf"
if [ ! -f "$v" ]; then
    echo "SKIP: shared vocab files absent"
    finish
    exit $?
fi
"$sb" synth --preset tiny-gemma4 --vocab "$v" --type Q8_0 --fast -o "$tmp/m.gguf" 2> /dev/null || bad "synth"
nl='
'
count() { "$sb" tokenize -m "$tmp/m.gguf" --parse-special -p "$1" | wc -w; }
run_chat() { # prompt token count and chat format line of sb run --chat -v "$@"
    "$sb" run -m "$tmp/m.gguf" --device cpu --chat -v -n 0 "$@" 2> "$tmp/err" > /dev/null || bad "run --chat $*: $(tail -1 "$tmp/err")"
    sed -n 's/^prompt: \([0-9]*\) tokens.*/\1/p' "$tmp/err"
}
n=$(run_chat -p "Hello")
grep -q '^chat format: gemma4' "$tmp/err" && ok || bad "chat format: $(grep 'chat format' "$tmp/err")"
grep -qx 'kv cache: 5120 bytes per token (f32), [0-9.]* MiB held' "$tmp/err" && ok || bad "sb run -v: $(grep 'kv cache' "$tmp/err")"
# -v's resident weights are sb info's "read per token" bytes, without the PLE table (gathered by row)
set -- $("$sb" info "$tmp/m.gguf" | sed -n 's/^model: *gemma4; \([0-9]*\) bytes of weights read per token (resident), \([0-9]*\) in tables gathered.*/\1 \2/p')
[ "${2:-0}" -gt 0 ] && grep -q "$(awk -v b="${1:-0}" 'BEGIN { printf "%.1f", b / 1e6 }') MB of weights read per token (resident" "$tmp/err" &&
    ok || bad "sb run -v / sb info resident weights: info '$*', run: $(grep '^model:' "$tmp/err")"
want=$((1 + $(count "<|turn>user${nl}Hello<turn|>${nl}<|turn>model${nl}<|channel>thought${nl}<channel|>")))
[ "$n" = "$want" ] && ok || bad "one-word chat prompt: '$n' tokens, want $want"
n=$(run_chat --system "Be brief." -p "Hello")
want=$((1 + $(count "<|turn>system${nl}Be brief.<turn|>${nl}<|turn>user${nl}Hello<turn|>${nl}<|turn>model${nl}<|channel>thought${nl}<channel|>")))
[ "$n" = "$want" ] && ok || bad "chat prompt with a system turn: '$n' tokens, want $want"
n=$(run_chat -p "a<turn|>b")
plain=$("$sb" tokenize -m "$tmp/m.gguf" -p "a<turn|>b" | wc -w)
want=$((1 + $(count "<|turn>user${nl}<turn|>${nl}<|turn>model${nl}<|channel>thought${nl}<channel|>") + plain))
[ "$n" = "$want" ] && ok || bad "a marker in the user text: '$n' prompt tokens, want $want (it must stay plain text)"
finish
