#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# bench/guile_traced_vs_c.sh — is the traced Scheme decoder ((sonicboom llama) traced by
# (sonicboom graph)) as fast as the built-in C builder on the same file? Three measurements:
#   sh bench/guile_traced_vs_c.sh BUILD MODEL.gguf time [ARGS]    interleaved timing (best, median)
#   sh bench/guile_traced_vs_c.sh BUILD MODEL.gguf plans          the planned graphs and memory plans compared
#   sh bench/guile_traced_vs_c.sh BUILD MODEL.gguf instructions [PREFILL] [STEPS] [K]
#                                                                instructions per call (callgrind, 1 thread)
# time: bench/guile_traced_vs_c.scm's rounds (ARGS: --device cpu|cuda --threads N --prefill T
#   --rounds R --decode-steps S --logits page-locked|ordinary). plans [ARGS]: that script under
#   SB_DUMP_IR=after:fuse_rope_store,memplan, then bench/plan_diff.py (exit 1 when the plans differ
#   beyond their input order; with --device cuda, the CUDA target's plans). A run that fails (no
#   GPU for --device cuda) prints its error and exits with its status. instructions:
#   valgrind --tool=callgrind counts every instruction of three runs per side — setup only, K
#   prefills of PREFILL tokens (default 8), K prefills plus K*STEPS decode steps (default 5 steps,
#   K 2) — and prints the differences per call: load-independent (the timing is not, on a shared
#   machine), single-threaded (a thread pool's waiting would be counted), the Scheme side of each
#   traced call included. Slow: minutes per run under valgrind on a 0.5B model.
set -eu
[ $# -ge 3 ] || { echo "usage: guile_traced_vs_c.sh BUILD MODEL.gguf time|plans|instructions [ARGS]" >&2; exit 2; }
build=$1 model=$2 what=$3
shift 3
root=$(cd "$(dirname "$0")/.." && pwd)
guile=$(command -v guile-3.0 || command -v guile) || { echo "error: guile 3.0 is not installed (apt-get install guile-3.0)" >&2; exit 1; }
# BUILD: a build folder, or a folder of prebuilt binaries (bench/gpu.sh --pack: libsonicboom.so.0)
lib="$(cd "$build" && pwd)/libsonicboom.so"
[ -f "$lib" ] || [ ! -f "$lib.0" ] || lib="$lib.0"
[ -f "$lib" ] || { echo "error: $lib not found (cmake --build $build --target sonicboom)" >&2; exit 1; }
export GUILE_SONICBOOM_LIB="$lib"
export XDG_CACHE_HOME="$(cd "$build" && pwd)/guile-cache"
scm="$guile -L $root/bindings/guile $root/bench/guile_traced_vs_c.scm $model"

case $what in
time) $scm "$@" ;;
plans)
    out=$(mktemp)
    trap 'rm -f "$out"' EXIT
    # the plans go to stderr with any error: on failure show the script's own lines, not the IR
    SB_DUMP_IR=after:fuse_rope_store,memplan $scm --rounds 1 --decode-steps 1 "$@" 2>"$out" >/dev/null || {
        rc=$?
        grep -E '^(error|usage|ERROR|Backtrace|In |[A-Za-z/].*:[0-9]+:[0-9]+:)' "$out" >&2 || tail -n 5 "$out" >&2
        exit $rc
    }
    python3 "$root/bench/plan_diff.py" "$out" ;;
instructions)
    prefill=${1:-8} steps=${2:-5} k=${3:-2}
    command -v valgrind >/dev/null || { echo "error: valgrind is not installed" >&2; exit 1; }
    count() { # side iters steps -> instructions of the whole run
        valgrind --tool=callgrind --callgrind-out-file=/dev/null $scm --threads 1 --prefill "$prefill" \
            --only "$1" --iters "$2" --decode-steps "$3" 2>&1 | sed -n 's/.*Collected : //p'
    }
    for side in traced c; do
        base=$(count $side 0 0) pre=$(count $side "$k" 0) all=$(count $side "$k" "$steps")
        echo "$side: setup $base; +$k prefills $pre; +$k*$steps decode steps $all"
        echo "$side: per prefill of $prefill tokens $(( (pre - base) / k )), per decode step $(( (all - pre) / (k * steps) )) instructions"
    done ;;
*) echo "error: unknown measurement \"$what\" (time, plans, instructions)" >&2; exit 2 ;;
esac
