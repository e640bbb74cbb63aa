#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# Hostile model input through the CLI: `sb info` never passes control characters or invalid UTF-8
# from metadata to the terminal or into its JSON; `sb run` refuses a vocabulary-only file with a
# clear line, refuses -c above the trained context unless --allow-long-context (which warns), and
# (with a third argument "presets", a separate test labelled slow) every synth preset up to 1.5B
# (Q4_0, --fast) writes a file that `sb run` loads.
. "$(dirname "$0")/../cli_lib.sh"

if [ "${3:-}" = presets ]; then
    # the 8B / 32B / Gemma 4 E2B, E4B, 31B presets write gigabytes even with --fast: checked by hand
    # (E2B Q4_K_M --fast: 3.4 GB in 30 s, runs) and by test_synth_gemma4 (their layouts), not here
    "$sb" synth --list > "$tmp/list" 2>&1
    for p in $(awk 'f && NF { print $1 } /^presets:/ { f = 1 }' "$tmp/list" | grep -v -e 8b -e 32b -e e4b -e e2b -e 31b); do
        "$sb" synth --preset "$p" -o "$tmp/s.gguf" --type Q4_0 --fast > /dev/null 2> "$tmp/err" || { bad "synth $p: $(cat "$tmp/err")"; continue; }
        "$sb" run -m "$tmp/s.gguf" -p a -n 1 -c 16 -t 2 > /dev/null 2> "$tmp/err" && ok || bad "run on synth $p: $(tail -1 "$tmp/err")"
        rm -f "$tmp/s.gguf"
    done
    [ $pass -ge 9 ] || bad "only $pass presets checked"
    finish
    exit
fi

# ---- a GGUF written byte by byte: keys and values with escape sequences and non-UTF-8 bytes ----
le64() { printf "\\$(printf %03o "$1")\\000\\000\\000\\000\\000\\000\\000"; }
kv_str() { # key value: a string metadata pair (lengths < 256)
    le64 "$(printf '%s' "$1" | wc -c)"; printf '%s' "$1"; printf '\010\000\000\000'
    le64 "$(printf '%s' "$2" | wc -c)"; printf '%s' "$2"
}
esc=$(printf '\033')
evil_name=$(printf '\033[31mRED\033]0;title\007 \302\233x \377\376 \342\200\256bidi')
{ printf 'GGUF\003\000\000\000'; le64 0; le64 2
  kv_str general.name "$evil_name"
  kv_str "evil${esc}[2Jkey" value; } > "$tmp/evil.gguf"
"$sb" info "$tmp/evil.gguf" > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && ok || bad "info evil: rc=$rc $(cat "$tmp/err")"
LC_ALL=C grep -q "$esc" "$tmp/out" && bad "info: a raw ESC reached the terminal" || ok
LC_ALL=C grep -q "$(printf '\233')" "$tmp/out" && bad "info: a raw C1 CSI byte reached the terminal" || ok
LC_ALL=C grep -q "$(printf '\342\200\256')" "$tmp/out" && bad "info: a raw bidi override reached the terminal" || ok
grep -qF '"\x1b[31mRED\x1b]0;title\x07 \u009bx \xff\xfe \u202ebidi"' "$tmp/out" && ok || bad "info: escapes not shown: $(cat -v "$tmp/out")"
grep -qF 'evil\x1b[2Jkey' "$tmp/out" && ok || bad "info: key not escaped"
"$sb" info --json "$tmp/evil.gguf" > "$tmp/out.json" 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && ok || bad "info --json evil: rc=$rc"
LC_ALL=C grep -q "$esc" "$tmp/out.json" && bad "info --json: raw ESC" || ok
if command -v iconv > /dev/null; then
    iconv -f UTF-8 -t UTF-8 "$tmp/out.json" > /dev/null 2>&1 && ok || bad "info --json: invalid UTF-8"
fi
if command -v python3 > /dev/null; then
    python3 - "$tmp/out.json" << 'EOF' && ok || bad "info --json: content"
import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
m = {e["key"]: e for e in d["metadata"]}
v = m["general.name"]["value"]
assert v.startswith("\x1b[31mRED\x1b]0;title\x07 \x9bx \ufffd\ufffd \u202ebidi"), v
assert m["general.name"].get("lossy") is True
assert "evil\x1b[2Jkey" in m and "lossy" not in m["evil\x1b[2Jkey"]
EOF
fi

# an error line quoting the file's strings is escaped too
{ printf 'GGUF\003\000\000\000'; le64 0; le64 1; kv_str general.architecture "${esc}]0;pwned${esc}\\x"; } > "$tmp/arch.gguf"
"$sb" run -m "$tmp/arch.gguf" -p hi > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -qF 'error: SB_ERR_MODEL_ARCH: ' "$tmp/err" && grep -qF '"\x1b]0;pwned\x1b\x"' "$tmp/err" &&
    ! LC_ALL=C grep -q "$esc" "$tmp/err" && ok || bad "arch error: rc=$rc $(cat -v "$tmp/err")"

# ---- sb run: vocabulary-only files, the trained context ----
voc="$data/vocab/ggml-vocab-qwen2.gguf"
model="$data/models/test-qwen2-q8_0.gguf"
if [ -f "$voc" ] && [ -f "$model" ]; then
    "$sb" run -m "$voc" -p hi -n 1 > /dev/null 2> "$tmp/err"; rc=$?
    [ $rc = 1 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -q '^error: SB_ERR_MODEL_TENSOR_MISSING: .*has a vocabulary but no weights' "$tmp/err" \
        && ok || bad "vocab-only: rc=$rc $(cat "$tmp/err")"
    "$sb" run -m "$model" -p hi -n 1 -c 8192 -t 1 > /dev/null 2> "$tmp/err"; rc=$?
    [ $rc = 1 ] && grep -q '^error: SB_ERR_INVALID_ARG: .*n_ctx 8192 exceeds .* 4096' "$tmp/err" && grep -q -- '--allow-long-context' "$tmp/err" \
        && ok || bad "-c 8192: rc=$rc $(cat "$tmp/err")"
    "$sb" run -m "$model" -p hi -n 1 -c 8192 -t 1 --allow-long-context > /dev/null 2> "$tmp/err"; rc=$?
    [ $rc = 0 ] && grep -q '^warning: session: n_ctx 8192 exceeds' "$tmp/err" && ok || bad "--allow-long-context: rc=$rc $(cat "$tmp/err")"
fi

# ---- tokenizer metadata: a BPE vocabulary needs merges; a missing pre-tokenizer is said ----
str() { le64 "$(printf '%s' "$1" | wc -c)"; printf '%s' "$1"; }
bpe_vocab() { # $1 = 1: with merges
    printf 'GGUF\003\000\000\000'; le64 0; le64 $((3 + $1))
    str general.architecture; printf '\010\000\000\000'; str qwen2
    str tokenizer.ggml.model; printf '\010\000\000\000'; str gpt2
    str tokenizer.ggml.tokens; printf '\011\000\000\000\010\000\000\000'; le64 3; str a; str b; str ab
    [ "$1" = 1 ] && { str tokenizer.ggml.merges; printf '\011\000\000\000\010\000\000\000'; le64 1; str "a b"; }
    return 0
}
for merges in 0 1; do
    bpe_vocab $merges > "$tmp/v$merges.gguf"
    "$sb" synth --preset tiny-qwen2 --vocab "$tmp/v$merges.gguf" -o "$tmp/bpe$merges.gguf" > /dev/null 2>&1 || bad "synth with a 3-token vocabulary"
done
"$sb" run -m "$tmp/bpe0.gguf" -p ab -n 1 > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && grep -q '^error: SB_ERR_VOCAB: tokenizer.ggml.merges is missing' "$tmp/err" && ok || bad "no merges: rc=$rc $(cat "$tmp/err")"
"$sb" run -m "$tmp/bpe1.gguf" -p ab -n 1 -v > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && grep -q '^warning: tokenizer: tokenizer.ggml.pre is missing: using the "default"' "$tmp/err" && ok || bad "no pre: rc=$rc $(cat "$tmp/err")"

finish
