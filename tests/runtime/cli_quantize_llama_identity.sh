#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# `sb quantize --imatrix` writes the same bytes as llama-quantize: for the qwen2 and llama F32 test
# models and an importance matrix of each (tests/data/imatrix/*.imatrix.gguf, made by llama.cpp
# de3ff81's llama-imatrix over 8 chunks of 64 tokens of tests/data/embedded-heldout.txt), the whole
# output file of every type in tests/data/imatrix/llama-quantize.sha256 hashes as llama-quantize
# de3ff81's (`llama-quantize --imatrix IM MODEL OUT TYPE 2`; "-" in the last column: no imatrix),
# metadata included. The K-quants, IQ4_XS, IQ4_NL and the legacy types: each one's imatrix path is
# exercised, and the file without an imatrix differs (the imatrix is used at all). The file records
# the imatrix path as given (quantize.imatrix.file), so it is passed as llama-quantize got it: the
# bare file name, from its folder.
. "$(dirname "$0")/../cli_lib.sh"
here=$(cd "$(dirname "$0")/.." && pwd)
case "$sb" in /*) ;; *) sb="$(pwd)/$sb" ;; esac
case "$data" in /*) ;; *) data="$(pwd)/$data" ;; esac
cp "$here"/data/imatrix/*.imatrix.gguf "$tmp"/
cd "$tmp" || exit 1
while read -r want model type im; do
    src="$data/models/test-$model-f32.gguf"
    if [ ! -r "$src" ]; then bad "$src: not found"; continue; fi
    if [ "$im" = "-" ]; then
        "$sb" quantize "$src" "$tmp/out.gguf" "$type" -t 2 > /dev/null 2> "$tmp/err"; rc=$?
    else
        "$sb" quantize --imatrix "$model.imatrix.gguf" "$src" "$tmp/out.gguf" "$type" -t 2 > /dev/null 2> "$tmp/err"; rc=$?
    fi
    got=$(sha256sum < "$tmp/out.gguf" | cut -c1-64)
    [ $rc = 0 ] && [ "$got" = "$want" ] && ok || bad "$model $type (imatrix ${im:-yes}): rc=$rc sha256 $got, llama-quantize $want $(cat "$tmp/err")"
    rm -f "$tmp/out.gguf"
done <<LIST
$(awk '{ print $1, $2, $3, ($4 == "-" ? "-" : "im") }' "$here/data/imatrix/llama-quantize.sha256")
LIST
# the imatrix changes the qwen2 Q4_K_M file (else the comparison above proves nothing about it)
a=$(grep ' qwen2 Q4_K_M$' "$here/data/imatrix/llama-quantize.sha256" | cut -c1-64)
b=$(grep ' qwen2 Q4_K_M -$' "$here/data/imatrix/llama-quantize.sha256" | cut -c1-64)
[ -n "$a" ] && [ -n "$b" ] && [ "$a" != "$b" ] && ok || bad "the imatrix and plain Q4_K_M hashes must differ"
finish
