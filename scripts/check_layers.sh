#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# scripts/check_layers.sh — lint the #include graph against the layer table (ARCHITECTURE.md,
# STYLE.md "Layout and layering"). The build already enforces it through per-layer include roots;
# this catches what the build cannot see (headers no .c includes yet, tools reaching into src/).
# Exit 1 and one line per violation.
set -eu
cd "${1:-$(dirname "$0")/..}"
allowed() { # layer -> the folders it may include
    case "$1" in
    base) echo "base" ;;
    quant) echo "base quant" ;;
    format) echo "base quant format" ;;
    backend/cpu) echo "base quant backend backend/cpu" ;;
    backend/cuda) echo "base quant backend backend/cuda" ;;
    ops) echo "base quant ops" ;;
    graph) echo "base quant ops graph backend" ;;
    codegen) echo "base quant ops graph backend backend/cuda codegen" ;;
    runtime) echo "base quant format ops graph codegen backend backend/cpu backend/cuda runtime" ;;
    api) echo "base quant format ops graph codegen backend backend/cpu backend/cuda runtime api" ;;
    esac
}
bad=0
for f in $(find src -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' | sort); do
    rel=${f#src/}
    case "$rel" in
    backend/cpu/*) layer=backend/cpu ;;
    backend/cuda/*) layer=backend/cuda ;;
    backend/*) layer=backend/cpu ;; # backend.h itself: base + quant only, checked below
    *) layer=${rel%%/*} ;;
    esac
    ok=$(allowed "$layer")
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        case "$inc" in
        sonicboom.h) continue ;;
        */*) ;;
        *) continue ;; # same-folder include
        esac
        dir=${inc%/*}
        hit=0
        for a in $ok; do
            if [ "$a" = backend ]; then
                # the backend folder itself offers only the device interface header
                [ "$inc" = backend/backend.h ] && hit=1
                continue
            fi
            case "$dir/" in "$a"/*) hit=1 ;; esac # the folder or one below it
        done
        if [ $hit = 0 ]; then echo "layering: $f includes \"$inc\" (layer $layer may use: $ok)"; bad=1; fi
    done
done
for f in $(find tools bindings bench/e2e -name '*.c' -o -name '*.h' 2>/dev/null | sort); do
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        case "$inc" in
        */*) echo "layering: $f includes \"$inc\" (tools and bindings use only sonicboom.h)"; bad=1 ;;
        esac
    done
done
[ $bad = 0 ] && echo "layering: include graph ok"
exit $bad
