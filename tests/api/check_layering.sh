#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# The include-graph lint passes on the tree, and fails on a tree with a planted violation.
set -eu
root=$1
sh "$root/scripts/check_layers.sh" "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/backend/cpu" "$tmp/src/graph"
printf '#include "graph/ir.h"\n' > "$tmp/src/backend/cpu/bad.c"
if sh "$root/scripts/check_layers.sh" "$tmp" >/dev/null; then echo "FAIL: planted violation not caught"; exit 1; fi
echo "2 passed, 0 failed"
