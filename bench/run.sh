#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# bench/run.sh BUILD_DIR — run the kernel micro-benchmarks built by `make bench` (2 threads, the
# configuration the CPU targets in docs PERFORMANCE.md are stated for). Extra arguments go to
# bench_gemv (e.g. -T 128, -q). SB_CPU_ISA=scalar|avx2|avx512 caps the kernel ISA.
set -eu
build=${1:-build}
[ $# -gt 0 ] && shift
exe="$build/bench/bench_bench_gemv"
if [ ! -x "$exe" ]; then
    echo "bench/run.sh: $exe not found; build it with: cmake --build $build --target benchmarks" >&2
    exit 1
fi
"$exe" -t 2 "$@"
