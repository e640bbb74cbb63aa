#!/bin/bash
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# bench/matrix.sh — the benchmark matrix: for each row (a `sb synth` preset and a type mix), make
# the file once (`sb synth --fast`: the model's exact shapes and type mix; weight values do not
# change speed), run `../shared/anchor/llama.sh compare` on it (our `sb bench` beside llama-bench,
# same file, same run, twice interleaved), and print one table: pp512, tg64 and tg64 @ d4096 for
# both with their ratio, decode GB/s (weights read per token x tg64 tok/s) against this GPU's
# measured copy bandwidth, and prefill TFLOP/s (2 x weight elements x pp512 tok/s; attention not
# counted). Ends with the geometric means of the ratios. Rows run one at a time and each file is
# deleted after its row, so the disk holds one model at a time.
#
#   SB=build/sb LB=/path/llama-bench bench/matrix.sh [ROWS...]
#
# ROWS: preset:TYPE items, or the sets `small` (the 0.5B-1.5B rows), `large` (8B and 32B rows),
# `all` (default). Environment: SB, LB (required), WORK (model dir, default /tmp/sb-matrix), R
# (repetitions per test, default 3), D (depths, default 0,4096), OUT (where matrix.md and the raw
# logs go, default $WORK), COPY_BW (GB/s; default: measured by bench/cuda_copy_bw.cu with nvcc),
# DEVICE (cuda | cpu, default cuda), T (threads, CPU only).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
ANCHOR=${ANCHOR:-$ROOT/../shared/anchor/llama.sh}
: "${SB:?SB=path/to/sb}" "${LB:?LB=path/to/llama-bench}"
WORK=${WORK:-/tmp/sb-matrix}; R=${R:-3}; D=${D:-0,4096}; OUT=${OUT:-$WORK}; DEVICE=${DEVICE:-cuda}
mkdir -p "$WORK" "$OUT"

SMALL="qwen2.5-0.5b:Q4_K_M qwen2.5-0.5b:Q4_0 qwen2.5-0.5b:Q8_0 qwen2.5-0.5b:F16 qwen3-0.6b:Q4_K_M
       llama-3.2-1b:Q4_K_M gemma3-1b:Q4_K_M qwen2.5-1.5b:Q4_K_M"
LARGE="llama-3.1-8b:Q4_K_M llama-3.1-8b:Q8_0 llama-3.1-8b:F16 qwen3-8b:Q4_K_M qwen2.5-32b:Q4_K_M"
rows=()
[ $# -gt 0 ] || set -- all
for a in "$@"; do
    case "$a" in
    small) rows+=($SMALL) ;;
    large) rows+=($LARGE) ;;
    all) rows+=($SMALL $LARGE) ;;
    *:*) rows+=("$a") ;;
    *) echo "matrix.sh: a row is preset:TYPE, or small | large | all (got '$a')"; exit 2 ;;
    esac
done

# ---- the ceiling ----
if [ -z "${COPY_BW:-}" ] && [ "$DEVICE" = cuda ]; then
    if nvcc -O2 -o "$WORK/copy_bw" "$HERE/cuda_copy_bw.cu" > "$OUT/copy_bw.log" 2>&1; then
        COPY_BW=$("$WORK/copy_bw" 2>> "$OUT/copy_bw.log")
    fi
fi
COPY_BW=${COPY_BW:-0}
echo "copy bandwidth: ${COPY_BW} GB/s; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"

# ---- one row ----
run_row() {
    local preset=${1%%:*} type=${1#*:}
    local f="$WORK/$preset-$type.gguf" log="$OUT/$preset-$type"
    local t0=$SECONDS
    if ! "$SB" synth --preset "$preset" --type "$type" --fast -o "$f" > "$log.synth.log" 2>&1; then
        echo "| $preset $type | synth failed: $(tail -n 1 "$log.synth.log") |" >> "$WORK/rows.md"
        return
    fi
    local t1=$SECONDS
    # bytes a decode step reads (sb info's count: tables gathered one row a token excluded — an untied
    # token_embd, gemma4's per-layer embeddings) and weight elements (prefill FLOPs), from the file's tensor table
    "$SB" info --json "$f" > "$log.info.json" 2> /dev/null
    read -r wbytes welems < <(python3 - "$log.info.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); ts = d["tensors"]
names = {t["name"] for t in ts}
step = d.get("model", {}).get("weight_bytes_per_token")  # sb's own count: gathered tables (gemma4's PLE) excluded
tied = "output.weight" not in names
b = e = 0
for t in ts:
    n = 1
    for x in t["shape"]: n *= x
    if t["name"] == "token_embd.weight" and not tied: continue
    b += t["bytes"]
    if len(t["shape"]) >= 2: e += n
print(step or b, e)
PY
)
    local tflags=""
    [ -n "${T:-}" ] && tflags="-t $T"
    # shellcheck disable=SC2086
    bash "$ANCHOR" compare "$SB" "$LB" "$f" -p 512 -n 64 -d "$D" -r "$R" --device "$DEVICE" $tflags > "$log.compare.md" 2>&1
    python3 - "$log.compare.md" "$preset" "$type" "${wbytes:-0}" "${welems:-0}" "$COPY_BW" "$((t1 - t0))" "$((SECONDS - t1))" \
        >> "$WORK/rows.md" <<'PY'
import re, sys
path, preset, typ, wbytes, welems, bw, ts, tb = sys.argv[1:9]
wbytes, welems, bw = float(wbytes), float(welems), float(bw)
res = {}
for line in open(path):
    # a test row: ours, llama.cpp's (each "best" or "run1/run2"; "-" where that side failed)
    m = re.match(r"\|\s*((?:pp|tg)\d+(?: @ d\d+)?)\s*\|\s*([\d,./-]+)\s*\|\s*([\d,./-]+)\s*\|", line)
    best = lambda v: max((float(x.replace(",", "")) for x in v.split("/") if x not in ("", "-")), default=0.0)
    if m: res[m.group(1)] = (best(m.group(2)), best(m.group(3)))
def cell(k):
    if k not in res: return "-"
    o, l = res[k]
    if not o: return f"- vs {l:,.0f}" if l else "-"
    return f"{o:,.0f} vs {l:,.0f} = **{o / l:.2f}x**" if l else f"{o:,.0f} vs -"
deep = [k for k in res if k.startswith("tg") and "@" in k]
tg = res.get("tg64", (0, 0))[0]
pp = res.get("pp512", (0, 0))[0]
gbs = tg * wbytes / 1e9
dec = f"{gbs:,.0f} GB/s" + (f" ({100 * gbs / bw:.0f}%)" if bw else "")
tf = f"{2 * welems * pp / 1e12:.1f}"
fails = [l.strip() for l in open(path) if l.startswith(("sb bench failed", "llama-bench failed"))]
note = ("(" + "; ".join(sorted(set(fails))) + ") ") if fails else ""
if not res: note = (open(path).read().strip().splitlines() or ["no output"])[-1][:80].replace("|", "/") + " "
print(f"| {preset} {typ} | {wbytes / 1e9:.2f} | {cell('pp512')} | {cell('tg64')} | {cell(deep[0]) if deep else '-'} | {dec} | {tf} | {ts}+{tb} s {note}|")
PY
    [ "${KEEP:-0}" = 1 ] || rm -f "$f"
}

: > "$WORK/rows.md"
for row in "${rows[@]}"; do
    run_row "$row"
    tail -n 1 "$WORK/rows.md"
done

# ---- the table ----
{
    echo "SonicBoom $("$SB" version 2>/dev/null | head -n 1) vs llama.cpp (llama-bench -fa 1$([ "$DEVICE" = cuda ] && echo ' -ngl 99')), $(date -u +%Y-%m-%d), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), copy bandwidth ${COPY_BW} GB/s, -r $R, best of two interleaved runs"
    echo
    echo "| model | GB read / token | pp512 tok/s | tg64 tok/s | tg64 @ d${D##*,} tok/s | decode | prefill TFLOP/s | synth+bench |"
    echo "|---|---:|---|---|---|---|---:|---|"
    cat "$WORK/rows.md"
    python3 - "$WORK/rows.md" <<'PY'
import math, re, sys
cols = {"pp512": [], "tg64": [], "deep": []}
for line in open(sys.argv[1]):
    c = line.split("|")
    if len(c) < 6: continue
    for k, i in (("pp512", 3), ("tg64", 4), ("deep", 5)):
        m = re.search(r"\*\*([\d.]+)x\*\*", c[i])
        if m: cols[k].append(float(m.group(1)))
g = lambda v: f"{math.exp(sum(map(math.log, v)) / len(v)):.2f}x over {len(v)}" if v else "-"
print(f"\ngeometric mean of the ratios: pp512 {g(cols['pp512'])}, tg64 {g(cols['tg64'])}, tg64 deep {g(cols['deep'])}")
PY
} > "$OUT/matrix.md"
echo
cat "$OUT/matrix.md"
