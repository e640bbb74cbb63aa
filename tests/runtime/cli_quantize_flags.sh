#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# `sb quantize`'s llama-quantize flags as a program: re-quantizing refused (exit 1, one line) without
# --allow-requantize and done with it; --pure puts every quantizable tensor in the base type;
# --tensor-type retypes exactly the matching tensors (first match wins); --output-tensor-type,
# --token-embedding-type, --leave-output-tensor; unsupported IQ mixes and types named; the size
# summary line; usage errors as one line with exit 2. Tensor types are read with `sb info --json`.
. "$(dirname "$0")/../cli_lib.sh"

# types FILE: "name type" lines of every tensor
types() {
    "$sb" info --json "$1" | python3 -c 'import json,sys
for t in json.load(sys.stdin)["tensors"]: print(t["name"], t["type"])'
}

# one_error FILE STATUS TEXT: FILE is exactly one line "error: STATUS: ...TEXT..."
one_error() {
    [ "$(wc -l < "$1")" = 1 ] && grep -q "^error: $2: .*$3" "$1"
}

"$sb" synth --preset tiny-qwen2 -o "$tmp/f32.gguf" --seed 5 --threads 2 > /dev/null 2>&1 || bad "synth"
"$sb" quantize "$tmp/f32.gguf" "$tmp/q4km.gguf" Q4_K_M 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && [ "$(wc -l < "$tmp/err")" = 1 ] \
    && grep -Eq '^quantize: wrote .*: model size = 6\.51 MiB \(32\.00 BPW\) -> quantized size = [0-9]+\.[0-9]{2} MiB \([0-9]+\.[0-9]{2} BPW\) in [0-9.]+ s$' "$tmp/err" \
    && ok || bad "summary line: rc=$rc $(cat "$tmp/err")"
# the summary's quantized size is the tensor bytes of the output (sb info's totals)
want=$("$sb" info --json "$tmp/q4km.gguf" | python3 -c 'import json,sys
d=json.load(sys.stdin); print("%.2f" % (sum(t["bytes"] for t in d["tensors"]) / 1048576.0))')
grep -q "quantized size = $want MiB" "$tmp/err" && ok || bad "summary size $want: $(cat "$tmp/err")"

# -- requantize --
"$sb" quantize "$tmp/q4km.gguf" "$tmp/r.gguf" Q8_0 > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && one_error "$tmp/err" SB_ERR_INVALID_ARG 'requantizing from type Q6_K is disabled.*--allow-requantize' \
    && [ ! -e "$tmp/r.gguf" ] && [ ! -s "$tmp/out" ] && ok || bad "requantize refused: rc=$rc $(cat "$tmp/err")"
"$sb" quantize --allow-requantize "$tmp/q4km.gguf" "$tmp/r.gguf" Q8_0 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && grep -q '^warning: .*dequantized' "$tmp/err" && grep -q ': model size = ' "$tmp/err" \
    && [ "$(types "$tmp/r.gguf" > "$tmp/t"; grep -c ' Q8_0$' "$tmp/t")" = 15 ] && ok || bad "--allow-requantize: rc=$rc $(cat "$tmp/err")"
# the same type again copies every tensor: nothing is re-quantized, so no flag is needed
"$sb" quantize "$tmp/q4km.gguf" "$tmp/same.gguf" Q4_K_M 2> /dev/null && cmp -s "$tmp/q4km.gguf" "$tmp/same.gguf" \
    && ok || bad "same-type copy needs no --allow-requantize"

# -- --pure: every quantizable tensor in Q4_K, 1-D tensors untouched --
"$sb" quantize --pure "$tmp/f32.gguf" "$tmp/pure.gguf" Q4_K_M 2> /dev/null || bad "--pure rc"
types "$tmp/pure.gguf" > "$tmp/t"
[ "$(grep -c ' Q4_K$' "$tmp/t")" = 15 ] && [ "$(grep -c ' F32$' "$tmp/t")" = 11 ] \
    && ! grep -q 'Q6_K' "$tmp/t" && ok || bad "--pure types: $(cat "$tmp/t")"
types "$tmp/q4km.gguf" > "$tmp/t"
grep -q 'blk.1.attn_v.weight Q6_K' "$tmp/t" && grep -q '^token_embd.weight Q6_K' "$tmp/t" \
    && ok || bad "without --pure: blk.1.attn_v and the tied embeddings are Q6_K"

# -- --tensor-type: exactly the matching tensors change; the first match wins --
"$sb" quantize --tensor-type 'attn_(q|k)\.weight=q8_0' --tensor-type 'ATTN_Q=f16' "$tmp/f32.gguf" "$tmp/tt.gguf" Q4_K_M \
    2> /dev/null || bad "--tensor-type rc"
types "$tmp/q4km.gguf" > "$tmp/base"
types "$tmp/tt.gguf" > "$tmp/t"
diff "$tmp/base" "$tmp/t" | grep '^>' | sort > "$tmp/d"
printf '%s\n' '> blk.0.attn_k.weight Q8_0' '> blk.0.attn_q.weight Q8_0' '> blk.1.attn_k.weight Q8_0' \
    '> blk.1.attn_q.weight Q8_0' > "$tmp/want"
cmp -s "$tmp/d" "$tmp/want" && ok || bad "--tensor-type changed: $(cat "$tmp/d")"
"$sb" quantize --tensor-type 'blk\.1\.ffn_down=q5_0' "$tmp/f32.gguf" "$tmp/tt2.gguf" Q4_K_M 2> /dev/null
types "$tmp/tt2.gguf" > "$tmp/t"
grep -q 'blk.1.ffn_down.weight Q5_0' "$tmp/t" && grep -q 'blk.0.ffn_down.weight Q4_K' "$tmp/t" \
    && ok || bad "--tensor-type regex on one layer"
# --output-tensor-type (tied or not) and --token-embedding-type
"$sb" quantize --output-tensor-type q8_0 --token-embedding-type Q5_0 "$tmp/f32.gguf" "$tmp/oe.gguf" Q4_K_M 2> /dev/null
types "$tmp/oe.gguf" > "$tmp/t"
grep -q '^token_embd.weight Q5_0$' "$tmp/t" && ok || bad "--token-embedding-type: $(grep token_embd "$tmp/t")"
if grep -q '^output.weight' "$tmp/t"; then
    grep -q '^output.weight Q8_0$' "$tmp/t" && ok || bad "--output-tensor-type"
fi
"$sb" quantize --output-tensor-type q8_0 "$tmp/f32.gguf" "$tmp/oe2.gguf" Q4_K_M 2> /dev/null
types "$tmp/oe2.gguf" > "$tmp/t"
grep -q '^token_embd.weight Q8_0$' "$tmp/t" && ok || bad "--output-tensor-type on tied embeddings"

# -- errors: one line each --
"$sb" quantize "$tmp/f32.gguf" "$tmp/e.gguf" IQ2_XXS 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && one_error "$tmp/err" SB_ERR_UNSUPPORTED 'IQ2_XXS' && [ ! -e "$tmp/e.gguf" ] && ok || bad "IQ2_XXS: rc=$rc $(cat "$tmp/err")"
"$sb" quantize --tensor-type attn_v=iq2_xxs "$tmp/f32.gguf" "$tmp/e.gguf" Q4_K_M 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && one_error "$tmp/err" SB_ERR_UNSUPPORTED 'type IQ2_XXS cannot be written' && ok || bad "tensor-type iq2_xxs: $(cat "$tmp/err")"
"$sb" quantize --tensor-type attn_v=q9_9 "$tmp/f32.gguf" "$tmp/e.gguf" Q4_K_M 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && one_error "$tmp/err" SB_ERR_INVALID_ARG 'unknown type "q9_9"' && ok || bad "tensor-type q9_9: $(cat "$tmp/err")"
"$sb" quantize --tensor-type 'attn_(v=q8_0' "$tmp/f32.gguf" "$tmp/e.gguf" Q4_K_M 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && one_error "$tmp/err" SB_ERR_INVALID_ARG 'not a valid regular expression' && ok || bad "bad regex: $(cat "$tmp/err")"
"$sb" quantize --output-tensor-type iq1_s "$tmp/f32.gguf" "$tmp/e.gguf" Q4_K_M 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && one_error "$tmp/err" SB_ERR_UNSUPPORTED 'IQ1_S' && ok || bad "output type iq1_s: $(cat "$tmp/err")"
[ ! -e "$tmp/e.gguf" ] && ok || bad "an output file after a failure"
for args in "--tensor-type" "--tensor-type attn_v" "--tensor-type =q8_0" "--tensor-type attn_v=" "--imatrix" \
            "--output-tensor-type" "--bogus" "$tmp/f32.gguf $tmp/e.gguf Q4_K_M 0" "$tmp/f32.gguf $tmp/e.gguf"; do
    # shellcheck disable=SC2086
    "$sb" quantize $args "$tmp/f32.gguf" "$tmp/e.gguf" Q4_K_M > "$tmp/out" 2> "$tmp/err"; rc=$?
    [ $rc = 2 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && [ ! -s "$tmp/out" ] && ok || bad "usage '$args': rc=$rc $(cat "$tmp/err")"
done
"$sb" quantize "$tmp/f32.gguf" "$tmp/n.gguf" 2 2> /dev/null && types "$tmp/n.gguf" > "$tmp/t" && grep -q 'attn_q.weight Q4_0$' "$tmp/t" \
    && ok || bad "numeric ftype 2 = Q4_0"
# flags llama-quantize ignores for a float mix: the same file, one warning naming them
"$sb" quantize "$tmp/f32.gguf" "$tmp/h1.gguf" F16 2> /dev/null
"$sb" quantize --pure --tensor-type attn=q8_0 "$tmp/f32.gguf" "$tmp/h2.gguf" F16 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && cmp -s "$tmp/h1.gguf" "$tmp/h2.gguf" && grep -q '^warning: .*without effect.*F16.*--tensor-type --pure' "$tmp/err" \
    && ok || bad "flags on F16: rc=$rc $(cat "$tmp/err")"
ls "$tmp" | grep -q -e '\.tmp\.' -e '\.scratch\.' && bad "temporary files left" || ok
finish
