#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# tests/guile/same_plan.sh SRC LIB ASAN DATA — the traced Scheme decoder ((sonicboom llama)) becomes
# the C builder's plan: bench/guile_traced_vs_c.scm runs both on a test model under
# SB_DUMP_IR=after:fuse_rope_store,memplan, and bench/plan_diff.py must find identical compute
# nodes and memory plans for prefill and decode (inputs may sit in another order), for llama,
# qwen2 (biases) and quantized qwen3 (q/k norms). A plan_diff that finds nothing to compare fails.
set -u
src=$1 lib=$2 asan=$3 data=$4
fail=0 pass=0
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
for name in llama-f32 qwen2-f32 qwen3-q8_0; do
    SB_DUMP_IR=after:fuse_rope_store,memplan sh "$src/tests/guile/run.sh" "$src" "$lib" "$asan" bench/guile_traced_vs_c.scm \
        "$data/models/test-$name.gguf" --prefill 6 --rounds 1 --decode-steps 1 > "$tmp/out" 2> "$tmp/plans"
    rc=$?
    [ $rc = 77 ] && { cat "$tmp/out"; exit 77; }
    if [ $rc != 0 ]; then
        fail=$((fail + 1)); echo "FAIL: $name: status $rc: $(grep -v '^//\|^%\|^===\|^arena' "$tmp/plans" | tail -3)"; continue
    fi
    if python3 "$src/bench/plan_diff.py" "$tmp/plans" > "$tmp/diff" 2>&1 && [ "$(grep -c 'compute nodes: identical' "$tmp/diff")" = 2 ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1)); echo "FAIL: $name: the traced plans differ from the C builder's:"; cat "$tmp/diff"
    fi
done
echo "$pass passed, $fail failed"
[ $fail = 0 ]
