#!/bin/bash
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# bench/ab.sh — an A/B of two CUDA builds in one device call, the two sides interleaved on the same
# card (a device session may get an H100 or an H200: compare only within one call).
#   here:   bench/ab.sh pack NAME BUILD_DIR   -> .gpubin/NAME.tar.xz: sb, sb-serve, libsonicboom.so.0
#           and the bench / CUDA test programs BUILD_DIR has (~20 MB; the kernels dominate)
#   there:  bench/ab.sh run A B [SECONDS]     (carry .gpubin/A.tar.xz .gpubin/B.tar.xz .gpubin/pcre2
#           .gpubin/cjson .gpubin/mhd, the last three from `bench/gpu.sh --pack`; results under $OUT)
# run, in this order, each section skipped once SECONDS (default 500) would be passed:
#   1. bench_cuda_gemv -r 20 at T 8 / 16 / 32 / 64, Llama-3.1-8B Q4_K / Q6_K and gemma4-e4b Q3_K shapes
#   2. sb bench -p 512 -n 64 -r 3, A B A B, on synthesized Llama-3.1-8B Q4_K_M and gemma4-e4b Q3_K_M
#   3. bench_batch -B 16,32,64 -p 160 -n 32 -r 2 -s 0 -ctk f16 (sb serve's KV type), A B A B, the 8B
#   4. bench_cuda_gaps -e -B 32 -d 160 -ctk f16, A then B: the batched step's kernels (needs CUPTI)
# Extra settings for side B alone: AB_TUNE_B (SB_TUNE's syntax), e.g. `run m22 m22` with a cu_config key
# A/B'd on one kit. Rows name the side and its kit: "A m22", "B w64".
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
G=$ROOT/.gpubin

if [ "${1:-}" = pack ]; then
    N=${2:?usage: bench/ab.sh pack NAME BUILD_DIR}
    B=${3:?usage: bench/ab.sh pack NAME BUILD_DIR}
    S=$(mktemp -d) || exit 1
    cp -L "$B/libsonicboom.so.0" "$S/" || exit 1
    for f in sb sb-serve bench_cuda_gemv bench_batch bench_cuda_gaps runtime_test_cuda_ops runtime_test_cuda_models api_test_batch \
        runtime_test_cuda_nonfinite; do
        for p in "$B/$f" "$B/bench/$f" "$B/tests/$f"; do [ -x "$p" ] && { cp "$p" "$S/"; break; }; done
    done
    mkdir -p "$G" && tar cf - -C "$S" . | xz -T2 -9 >"$G/$N.tar.xz"
    rc=$?
    rm -rf "$S"
    ls -la "$G/$N.tar.xz"
    exit $rc
fi

[ "${1:-}" = run ] && [ $# -ge 3 ] || { sed -n '3,17p' "$0" >&2; exit 2; }
KA=$2 KB=$3 LIM=${4:-500}
O=${OUT:-/tmp/ab-out}
mkdir -p "$O"
for k in "$KA" "$KB"; do
    rm -rf "/tmp/ab-$k" && mkdir -p "/tmp/ab-$k" && tar xJf "$G/$k.tar.xz" -C "/tmp/ab-$k" || { echo "ab: cannot unpack $G/$k.tar.xz"; exit 1; }
done
LIBS=$G/pcre2/lib:$G/cjson/lib:$G/mhd/lib:/usr/local/cuda/extras/CUPTI/lib64
kit() { if [ "$1" = A ]; then echo "$KA"; else echo "$KB"; fi; }
# side s's (A or B) program prog, on its kit's library (and, for B, with AB_TUNE_B)
on() {
    local s=$1 prog=$2 k
    k=$(kit "$1")
    shift 2
    local tune=""
    [ "$s" = B ] && tune=${AB_TUNE_B:-}
    SB_TUNE=$tune LD_LIBRARY_PATH=/tmp/ab-$k:$LIBS "/tmp/ab-$k/$prog" "$@"
}
left() { [ $SECONDS -lt $((LIM - $1)) ]; }

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$O/gpu.txt"
(
    for x in "llama-3.1-8b Q4_K_M l8q4" "gemma4-e4b Q3_K_M e4b"; do
        set -- $x
        [ -f "/tmp/$3.gguf" ] || on A sb synth --preset "$1" --type "$2" --fast -o "/tmp/$3.gguf" >"/tmp/ab-synth-$3.log" 2>&1
    done
    touch /tmp/ab-synth.done
) &

echo "## 1. per matrix, us (bench_cuda_gemv -r 20)" | tee "$O/gemv.txt"
for T in 8 16 32 64; do
    left 120 || break
    for k in A B; do
        row=$(for m in "-m 8b -t Q4_K,Q6_K" "-m e4b -t Q3_K"; do
            on "$k" bench_cuda_gemv -r 20 $m -T $T 2>&1 | grep '^| ' | grep -v -- '---\|model' | awk -F'|' '{gsub(/ +/, " "); printf "%s%s %s;", $3, $4, $8}'
        done)
        echo "T $T $k $(kit $k):$row"
    done
done | tee -a "$O/gemv.txt"

while [ ! -f /tmp/ab-synth.done ] && left 60; do sleep 2; done
echo "## 2. sb bench -p 512 -n 64 -r 3 (tok/s)" | tee "$O/bench.txt"
for m in l8q4 e4b; do
    for k in A B A B; do
        left 100 || break 2
        echo "$m $k $(kit $k): $(on "$k" sb bench -m "/tmp/$m.gguf" -p 512 -n 64 -r 3 2>&1 | grep -E '\| +(pp512|tg64) ' | awk -F'|' '{gsub(/ +/, " "); printf "%s%s;", $7, $8}')"
    done
done | tee -a "$O/bench.txt"

echo "## 3. bench_batch -p 160 -n 32 -r 2 -s 0 -ctk f16, 8B (B: tok/s)" | tee "$O/batch.txt"
for k in A B A B; do
    left 60 || break
    echo "$k $(kit $k): $(on "$k" bench_batch -m /tmp/l8q4.gguf -B 16,32,64 -p 160 -n 32 -r 2 -s 0 -ctk f16 -d cuda 2>&1 | grep -E '^\| *[0-9]|rror' | awk -F'|' '{gsub(/ +/, " "); printf "%s:%s ", $2, $3}')"
done | tee -a "$O/batch.txt"

echo "## 4. bench_cuda_gaps -e -B 32 -d 160 -ctk f16" | tee "$O/gaps.txt"
for k in A B; do
    left 30 || break
    on "$k" bench_cuda_gaps -m /tmp/l8q4.gguf -e -B 32 -d 160 -n 8 -ctk f16 >"$O/gaps-$k.txt" 2>&1
    echo "$k $(kit $k): $(tail -n 1 "$O/gaps-$k.txt")"
done | tee -a "$O/gaps.txt"
echo "ab: done in ${SECONDS} s"
