#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# fuzz/run.sh FUZZER — run a libFuzzer target for $FUZZ_SECONDS (default 60) seeded with the shared
# GGUF files (their first 128 KiB: header, metadata and tensor infos, where the parser's logic is).
# Fails (exit != 0) on any crash, leak, sanitizer report, timeout or OOM.
set -eu
fuzzer=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
secs=${FUZZ_SECONDS:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
data=${SB_TESTDATA:-$root/../shared/testdata}
corpus=$root/build-fuzz/corpus
mkdir -p "$corpus"
n=0
for f in "$data"/models/*.gguf "$data"/vocab/*.gguf; do
    [ -f "$f" ] || continue
    head -c 131072 "$f" > "$corpus/seed-$(basename "$f")"
    n=$((n + 1))
done
echo "fuzz: $fuzzer for ${secs}s, $n seed files"
cd "$root/build-fuzz"
ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 \
"$fuzzer" -max_total_time="$secs" -max_len=131072 -rss_limit_mb=2048 -timeout=5 -print_final_stats=1 "$corpus"
