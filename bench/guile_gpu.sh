#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# bench/guile_gpu.sh — the traced Scheme decoder against the C builder on GPU 0, one table row per
# model (issue 29: within 3 %):
#   sh bench/guile_gpu.sh BUILD MODEL...
# MODEL: a .gguf path, or preset:NAME for `BUILD/sb synth --preset NAME --type Q4_K_M --fast`
# (written once under the output folder), e.g. preset:qwen2.5-0.5b preset:llama-3.2-1b.
# For each model: bench/guile_traced_vs_c.sh BUILD MODEL time --device cuda twice, --logits
# page-locked and --logits ordinary (bench/guile_traced_vs_c.scm's header: where each side's
# logits land), and plans --device cuda (bench/plan_diff.py on the CUDA target's plans).
# The row, each side writing its logits into the same kind of host memory:
#   prefill traced | prefill C | prefill traced/C  (--logits ordinary: T rows of logits into ordinary
#       memory on both sides, the C side through sb_session_eval_all — the public API has no
#       page-locked destination for a C prefill's rows)
#   decode traced | decode C | decode traced/C     (--logits page-locked: the traced program's reused
#       page-locked result against sb_session_decode's page-locked buffer, both written by the GPU
#       directly)
#   decode traced/C (ordinary memory)               (--logits ordinary: both decode steps copy the
#       logits into ordinary memory; the C step is sb_session_eval_all of one token)
#   plans: same or DIFFER
# Times are best / median ms a call; ratios traced / C of the best and of the median. The C side
# also scans every logit for NaN/Inf, which the traced side does not (its cost, in every column).
# Env: DEVICE (default cuda; cpu checks this script on a machine without a GPU), ROUNDS (default 21), PREFILL (tokens, default 32), STEPS (decode steps a round, default 16),
# GUILE_GPU_OUT (the folder for the logs and synthesized files; default $OUT/guile_gpu when $OUT is
# set, else /tmp/guile_gpu). guile 3.0 must be on PATH (with its module paths in the environment).
# Exit 1 when a model's run failed (its row says where; the log has the error).
set -u
[ $# -ge 2 ] || { echo "usage: guile_gpu.sh BUILD MODEL.gguf|preset:NAME..." >&2; exit 2; }
build=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
device=${DEVICE:-cuda} rounds=${ROUNDS:-21} prefill=${PREFILL:-32} steps=${STEPS:-16}
out=${GUILE_GPU_OUT:-${OUT:+$OUT/guile_gpu}}
out=${out:-/tmp/guile_gpu}
mkdir -p "$out" || exit 1
bench="sh $root/bench/guile_traced_vs_c.sh $build"
status=0

# "traced best/median | C best/median | ratio best/median" of a time log's PHASE (wall) line
cells() {
    sed -n "s/^$2[0-9 ]* (wall): traced best \([0-9.]*\) ms median \([0-9.]*\) ms; C best \([0-9.]*\) ms median \([0-9.]*\) ms; traced\/C best \([0-9.]*\) median \([0-9.]*\)\$/\1\/\2 | \3\/\4 | \5\/\6/p" "$1"
}

# the .gguf for a MODEL argument (synthesizing a preset once)
model_file() {
    case $1 in
    preset:*)
        f="$out/${1#preset:}-Q4_K_M.gguf"
        [ -f "$f" ] || "$build/sb" synth --preset "${1#preset:}" --type Q4_K_M --fast -o "$f" >"$out/synth-${1#preset:}.log" 2>&1 || {
            echo "error: sb synth --preset ${1#preset:} failed (log: $out/synth-${1#preset:}.log)" >&2
            return 1
        }
        echo "$f" ;;
    *) echo "$1" ;;
    esac
}

echo "device $device; prefill $prefill tokens, $steps decode steps a round, $rounds rounds; ms a call (best/median); logs in $out"
echo "model | prefill traced | prefill C | prefill traced/C | decode traced | decode C | decode traced/C | decode traced/C (ordinary memory) | plans"
for arg in "$@"; do
    name=$(basename "${arg#preset:}" .gguf)
    f=$(model_file "$arg") || { echo "$name | synth failed"; status=1; continue; }
    log="$out/$name"
    args="--device $device --prefill $prefill --decode-steps $steps --rounds $rounds"
    $bench "$f" time $args --logits page-locked >"$log.locked.txt" 2>"$log.locked.err" || { echo "$name | time --logits page-locked failed: $(grep -m1 '^error' "$log.locked.err")"; status=1; continue; }
    $bench "$f" time $args --logits ordinary >"$log.ordinary.txt" 2>"$log.ordinary.err" || { echo "$name | time --logits ordinary failed: $(grep -m1 '^error' "$log.ordinary.err")"; status=1; continue; }
    $bench "$f" plans --device "$device" --prefill "$prefill" >"$log.plans.txt" 2>&1
    case $? in
    0) plans=same ;;
    1) if grep -q '^error' "$log.plans.txt"; then plans="failed: $(grep -m1 '^error' "$log.plans.txt")"; status=1; else plans=DIFFER; fi ;;
    *) plans="failed (log: $log.plans.txt)"; status=1 ;;
    esac
    echo "$name | $(cells "$log.ordinary.txt" prefill) | $(cells "$log.locked.txt" decode) | $(cells "$log.ordinary.txt" decode | sed 's/.* | //') | $plans"
done
exit $status
