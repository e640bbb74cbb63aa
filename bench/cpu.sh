#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# bench/cpu.sh [BUILD_DIR] — the end-to-end CPU benchmark of PERFORMANCE.md: a Qwen2.5-0.5B-shape
# Q4_K_M file made offline with our own tools (sb synth with the shared qwen2 vocabulary), then
# `sb bench` with llama-bench's tests (pp512, tg64, tg64 @ d512) on 2 threads, the achieved GB/s and
# fraction of the read bandwidth measured in the same run, and the prefix-reuse first-token latency.
# Compare with llama.cpp on this machine: pp512 85.3, tg64 25.6, tg64 @ d512 21.2 tok/s.
set -eu
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
vocab=${SB_TESTDATA:-$root/../shared/testdata}/vocab/ggml-vocab-qwen2.gguf
model=$build/bench-models/qwen2.5-0.5b-q4_k_m.gguf
mkdir -p "$build/bench-models"
if [ ! -f "$model" ]; then
    "$build/sb" synth --preset qwen2.5-0.5b --vocab "$vocab" --type Q4_K_M -o "$model"
fi
"$build/sb" bench -m "$model" -p 512 -n 64 -d 0,512 -r ${REPS:-5} -t ${THREADS:-2} --prefix 512,64
