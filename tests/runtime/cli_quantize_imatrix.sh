#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# `sb quantize --imatrix FILE`: a valid llama-imatrix GGUF (written by make_imatrix.py for the test
# model) changes the quantized tensor data and records llama-quantize's quantize.imatrix.* keys;
# uniform importances are accepted too; every malformed file (entry naming no tensor, wrong
# length, NaN, negative sum, fractional count, unpaired sums, missing metadata, F16 counts,
# 4-D sums, too many counts, a stray tensor, truncated, legacy .dat) fails with exit 1, one "error: SB_ERR_FORMAT...: imatrix ..." line that
# names the problem, and no output file.
. "$(dirname "$0")/../cli_lib.sh"
gen=$(dirname "$0")/make_imatrix.py

# tensor_bytes FILE NAME: hex of that tensor's data
tensor_bytes() {
    "$sb" info --json "$1" | python3 -c 'import json,sys
d=json.load(sys.stdin); t=[t for t in d["tensors"] if t["name"]==sys.argv[2]][0]
f=open(sys.argv[1],"rb"); f.seek(d["data_offset"]+t["offset"]); print(f.read(t["bytes"]).hex())' "$1" "$2"
}

"$sb" synth --preset tiny-qwen2 -o "$tmp/m.gguf" --seed 9 --threads 2 > /dev/null 2>&1 || bad "synth"
"$sb" info --json "$tmp/m.gguf" > "$tmp/m.json"
"$sb" quantize "$tmp/m.gguf" "$tmp/plain.gguf" Q4_K_M 2> /dev/null || bad "plain quantize"

for mode in valid wrong-name wrong-length nan negative bad-count unpaired no-meta truncated legacy bad-type uniform bad-shape count-len stray; do
    python3 "$gen" $mode "$tmp/im-$mode.gguf" < "$tmp/m.json" || bad "make_imatrix $mode"
done

"$sb" quantize --imatrix "$tmp/im-valid.gguf" "$tmp/m.gguf" "$tmp/w.gguf" Q4_K_M 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && grep -q '^quantize: wrote .*: model size = ' "$tmp/err" && [ "$(wc -l < "$tmp/err")" = 1 ] && ok || bad "valid imatrix: rc=$rc $(cat "$tmp/err")"
for t in blk.0.attn_q.weight blk.1.ffn_down.weight; do
    [ "$(tensor_bytes "$tmp/w.gguf" $t)" != "$(tensor_bytes "$tmp/plain.gguf" $t)" ] && ok || bad "imatrix did not change $t"
done
# 1-D tensors are copied whatever the imatrix says
[ "$(tensor_bytes "$tmp/w.gguf" output_norm.weight)" = "$(tensor_bytes "$tmp/plain.gguf" output_norm.weight)" ] && ok \
    || bad "output_norm changed"
"$sb" info "$tmp/w.gguf" > "$tmp/info"
grep -q "quantize.imatrix.file .*= \"$tmp/im-valid.gguf\"" "$tmp/info" && grep -q 'quantize.imatrix.dataset .*= "calibration.txt"' "$tmp/info" \
    && grep -q 'quantize.imatrix.entries_count .*= 15$' "$tmp/info" && grep -q 'quantize.imatrix.chunks_count .*= 42$' "$tmp/info" \
    && ok || bad "imatrix metadata: $(grep quantize "$tmp/info")"
# the same importances twice: the same file (deterministic, thread count irrelevant)
"$sb" quantize --imatrix "$tmp/im-valid.gguf" "$tmp/m.gguf" "$tmp/w2.gguf" Q4_K_M --threads 1 2> /dev/null
cmp -s "$tmp/w.gguf" "$tmp/w2.gguf" && ok || bad "imatrix output differs between runs / thread counts"
"$sb" quantize --imatrix "$tmp/im-uniform.gguf" "$tmp/m.gguf" "$tmp/u.gguf" Q5_0 2> /dev/null && ok || bad "uniform imatrix"
"$sb" quantize --imatrix "$tmp/im-valid.gguf" "$tmp/m.gguf" "$tmp/i4.gguf" IQ4_XS 2> /dev/null && ok || bad "IQ4_XS with imatrix"

# Q2_K_S: llama-quantize requires an imatrix for its Q2_K tensors (not for the embeddings / output)
"$sb" quantize "$tmp/m.gguf" "$tmp/k.gguf" Q2_K_S 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -q '^error: SB_ERR_INVALID_ARG: .*Q2_K_S needs an importance matrix (--imatrix) for tensor "blk.0.attn_k.weight" (Q2_K)' "$tmp/err" \
    && [ ! -e "$tmp/k.gguf" ] && ok || bad "Q2_K_S without imatrix: rc=$rc $(cat "$tmp/err")"
"$sb" quantize --imatrix "$tmp/im-valid.gguf" "$tmp/m.gguf" "$tmp/k.gguf" Q2_K_S 2> "$tmp/err"; rc=$?
"$sb" info "$tmp/k.gguf" > "$tmp/info" 2>&1
[ $rc = 0 ] && grep -q 'general.file_type .*= 21$' "$tmp/info" && grep -q 'blk.0.ffn_down.weight *Q2_K ' "$tmp/info" \
    && grep -q 'token_embd.weight *Q6_K ' "$tmp/info" && ok || bad "Q2_K_S with imatrix: rc=$rc $(cat "$tmp/err")"

# check_fail MODE TEXT: exit 1, one line naming the problem, no output
check_fail() {
    "$sb" quantize --imatrix "$tmp/im-$1.gguf" "$tmp/m.gguf" "$tmp/x.gguf" Q4_K_M > "$tmp/out" 2> "$tmp/err"; rc=$?
    [ $rc = 1 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -q "^error: SB_ERR_FORMAT[A-Z_]*: .*imatrix.*$2" "$tmp/err" \
        && [ ! -e "$tmp/x.gguf" ] && [ ! -s "$tmp/out" ] && ok || bad "imatrix $1: rc=$rc $(cat "$tmp/err")"
}
check_fail wrong-name 'entry "blk.99.ffn_down.weight" names no tensor of the model'
check_fail wrong-length 'has 224 x 1 values; the tensor needs 256 x 1'
check_fail nan 'token_embd.weight.in_sum2\[5\] = nan'
check_fail negative 'token_embd.weight.in_sum2\[7\] = -1'
check_fail bad-count 'counts\[0\] = 2.5 is not a count'
check_fail unpaired 'mismatched sums and counts for token_embd.weight'
check_fail no-meta 'missing metadata key imatrix.datasets'
check_fail truncated 'exceeds file size'
check_fail legacy 'legacy .dat imatrix format is not supported'
check_fail bad-type 'must be F32'
check_fail bad-shape 'in_sum2 has shape \[256, 1, 1, 2\]'
check_fail count-len 'counts has 2 values for 1 matrices'
check_fail stray 'unexpected tensor "token_embd.weight.stats"'
"$sb" quantize --imatrix "$tmp/absent.gguf" "$tmp/m.gguf" "$tmp/x.gguf" Q4_K_M 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && grep -q '^error: SB_ERR_IO: .*absent.gguf' "$tmp/err" && ok || bad "missing imatrix: $(cat "$tmp/err")"
# the IQ1-IQ3 mixes stay unsupported, imatrix or not
"$sb" quantize --imatrix "$tmp/im-valid.gguf" "$tmp/m.gguf" "$tmp/x.gguf" IQ2_XXS 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && grep -q '^error: SB_ERR_UNSUPPORTED: .*IQ2_XXS' "$tmp/err" && ok || bad "IQ2_XXS with imatrix: $(cat "$tmp/err")"
ls "$tmp" | grep -q -e '\.tmp\.' -e '\.scratch\.' && bad "temporary files left" || ok
finish
