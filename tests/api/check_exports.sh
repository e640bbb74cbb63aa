#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# libsonicboom.so exports only sb_* symbols, has a versioned SONAME, and exports the whole header.
set -eu
lib=$1
fail=0
syms=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}')
n=$(echo "$syms" | grep -c . || true)
other=$(echo "$syms" | grep -v '^sb_' || true)
if [ -n "$other" ]; then echo "FAIL: non-sb_ symbols exported:"; echo "$other" | head -20; fail=1; fi
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
case "$soname" in libsonicboom.so.[0-9]*) ;; *) echo "FAIL: SONAME '$soname' is not versioned"; fail=1 ;; esac
# every function declared SB_API in the header is exported
hdr=$(dirname "$0")/../../include/sonicboom.h
for f in $(grep -E '^SB_API ' "$hdr" | grep -o 'sb_[a-z0-9_]*(' | head -1000 | tr -d '(' | sort -u); do
    echo "$syms" | grep -qx "$f" || { echo "FAIL: $f declared in sonicboom.h but not exported"; fail=1; }
done
[ $fail = 0 ] && echo "$n symbols exported, all sb_*; SONAME $soname" && echo "1 passed, 0 failed"
exit $fail
