#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# `sb bench` as a drop-in for llama-bench's outputs, on the embedded model with tiny tests:
# every format parses (json/jsonl with python's json, csv with its csv module, sql through sqlite3,
# md's table shape); json, jsonl, csv and sql carry exactly llama-bench's fields in its order (the
# list below: llama.cpp de3ff81's tools/llama-bench, the version ../shared/anchor holds); model_type is llama_model_desc's form; a model
# path holding '"', '\', a newline and an invalid UTF-8 byte, and a crafted general.name (quotes,
# escape codes, invalid UTF-8) still give valid JSON / CSV / SQL and a terminal-safe md table;
# lists, ranges and several -m give the cross product of rows in llama-bench's order; -pg names
# "pp8+tg4"; --prefix, -fa 0, -oe, --progress, -lm none | mmap | auto; bad list syntax is one usage
# line and exit 2.
. "$(dirname "$0")/../cli_lib.sh"
model=$(ls "$(dirname "$0")"/../../models/*-q8_0.gguf | head -1)
fields="build_commit build_number cpu_info gpu_info backends model_filename model_type model_size model_n_params
n_batch n_ubatch n_threads cpu_mask cpu_strict poll type_k type_v n_gpu_layers n_cpu_moe split_mode main_gpu
no_kv_offload flash_attn devices tensor_split tensor_buft_overrides load_mode lazy_mode embeddings no_op_offload
no_host fit_target fit_min_ctx n_prompt n_gen n_depth test_time avg_ns stddev_ns avg_ts stddev_ts"
export fields
tiny="-p 8 -n 4 -r 1 -t 1 --bw 10"

# check.py FORMAT FILE [EXPECT...]: parse FILE as FORMAT (json, jsonl, csv, sql), check the exact key
# order, print one line per row: "n_prompt n_gen n_depth n_threads model_type|model_filename"
cat > "$tmp/check.py" <<'EOF'
import csv, io, json, os, sqlite3, sys
fmt, path = sys.argv[1], sys.argv[2]
want = os.environ["fields"].split()
raw = open(path, "rb").read()
text = raw.decode("utf-8")  # strict: the output must be valid UTF-8
if fmt == "json":
    rows = json.loads(text)
    keys = [list(r.keys()) for r in rows]
    want_keys = want + ["samples_ns", "samples_ts"]
elif fmt == "jsonl":
    rows = [json.loads(l) for l in text.split("\n") if l]
    keys = [list(r.keys()) for r in rows]
    want_keys = want + ["samples_ns", "samples_ts"]
elif fmt == "csv":
    rd = list(csv.reader(io.StringIO(text, newline="")))
    rows = [dict(zip(rd[0], r)) for r in rd[1:]]
    keys = [rd[0]] + [list(r.keys()) for r in rows]
    want_keys = want
    assert all(len(r) == len(want) for r in rd), "csv: a row with the wrong number of fields"
else:
    db = sqlite3.connect(":memory:")
    db.executescript(text)
    cols = [c[1] for c in db.execute("PRAGMA table_info(llama_bench)")]
    cur = db.execute("SELECT * FROM llama_bench")
    rows = [dict(zip(cols, r)) for r in cur]
    keys = [cols]
    want_keys = want
for k in keys:
    assert k == want_keys, "keys differ: %r" % [x for x in k if x not in want_keys] + [x for x in want_keys if x not in k]
for r in rows:
    if fmt in ("json", "jsonl"):
        assert r["flash_attn"] == 1 and not isinstance(r["flash_attn"], bool), "flash_attn"
        assert len(r["samples_ns"]) == len(r["samples_ts"]) >= 1, "samples"
        assert r["avg_ts"] > 0 and r["model_size"] > 0 and r["model_n_params"] > 0
    print(r["n_prompt"], r["n_gen"], r["n_depth"], r["n_threads"], "%s|%s" % (r["model_type"], r["model_filename"]))
EOF
check() { python3 "$tmp/check.py" "$@"; }

# ---- every format: parses, exact keys; -oe writes the same to stderr ----
for f in json jsonl csv sql; do
    "$sb" bench $tiny -o $f > "$tmp/out.$f" 2> "$tmp/err"; rc=$?
    if [ $rc = 0 ] && check $f "$tmp/out.$f" > "$tmp/rows" 2> "$tmp/why"; then ok; else bad "-o $f: rc=$rc $(cat "$tmp/err" "$tmp/why")"; fi
    # the default model: the embedded one
    [ "$(tr '\n' ';' < "$tmp/rows")" = "8 0 0 1 llama ?B Q8_0|$(sed -n 's/.*|//p;q' "$tmp/rows");0 4 0 1 llama ?B Q8_0|$(sed -n 's/.*|//p;q' "$tmp/rows");" ] \
        && sed -n 's/.*|//p;q' "$tmp/rows" | grep -q -- '/models/[^/]*-q8_0\.gguf$' && ok || bad "-o $f rows: $(cat "$tmp/rows")"
    "$sb" bench $tiny -o none -oe $f > "$tmp/out" 2> "$tmp/err.$f"; rc=$?
    [ $rc = 0 ] && [ ! -s "$tmp/out" ] && check $f "$tmp/err.$f" > /dev/null 2>&1 && ok || bad "-oe $f: rc=$rc"
done
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))[0]; assert r["backends"] in ("CPU","CUDA") and r["type_k"]=="f16" and r["cpu_mask"]=="0x0" and r["poll"]==50 and r["split_mode"]=="layer" and r["n_batch"]==2048 and r["n_ubatch"]==512 and r["load_mode"]=="mmap" and r["lazy_mode"]=="auto" and r["no_host"] is False' "$tmp/out.json" && ok || bad "json neutral values"
# model_size / model_n_params: every tensor of the file, as sb info's totals
"$sb" info "$model" > "$tmp/info"
python3 -c 'import json,sys,re; r=json.load(open(sys.argv[1]))[0]; t=open(sys.argv[2]).read(); assert str(r["model_n_params"]) in t.replace(",",""), (r["model_n_params"], t[-300:])' "$tmp/out.json" "$tmp/info" && ok || bad "model_n_params vs sb info: $(grep -i total "$tmp/info")"

# ---- md: llama-bench's table + GB/s, % of bw; the build line ----
"$sb" bench $tiny > "$tmp/md" 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && head -1 "$tmp/md" | grep -q '^| model  *|  *size |  *params | backend  *|.* test |  *t/s |  *GB/s |  *% of bw |$' \
    && grep -q '^| llama ?B Q8_0  *|  *[0-9.]* MiB |  *[0-9.]* M | ' "$tmp/md" && grep -q '|  *tg4 |' "$tmp/md" \
    && grep -q '^build: [0-9a-f]* ([0-9]*)$\|^build: unknown (0)$' "$tmp/md" && grep -q '^% of bw: of 10.0 GB/s (--bw)$' "$tmp/md" \
    && ok || bad "md: rc=$rc $(cat "$tmp/md" "$tmp/err")"
[ "$(grep -c '^| ' "$tmp/md")" = 4 ] && ok || bad "md rows: $(cat "$tmp/md")"

# without general.file_type, llama.cpp guesses from the most common tensor type: "(guessed) Q8_0"
python3 - "$model" "$tmp/noft.gguf" <<'EOF' || bad "cannot rename general.file_type"
import sys
b = open(sys.argv[1], "rb").read()
assert b.count(b"general.file_type") == 1
open(sys.argv[2], "wb").write(b.replace(b"general.file_type", b"general.file_typX"))
EOF
"$sb" bench -p 8 -n 0 -r 1 -t 1 -o jsonl -m "$tmp/noft.gguf" > "$tmp/x" 2> "$tmp/err" && [ "$(check jsonl "$tmp/x" | sed 's/|.*//')" = "8 0 0 1 llama ?B (guessed) Q8_0" ] \
    && ok || bad "guessed file type: $(cat "$tmp/err") $(check jsonl "$tmp/x")"

# ---- a hostile model path: '"', '\', a newline, an invalid UTF-8 byte ----
weird="$tmp/$(printf 'we"ird\\dir\nx\377y')"
mkdir "$weird" && cp "$model" "$weird/m.gguf" || bad "cannot make the hostile path"
for f in json jsonl csv sql; do
    "$sb" bench $tiny -o $f -m "$weird/m.gguf" > "$tmp/w.$f" 2> "$tmp/err"; rc=$?
    [ $rc = 0 ] && check $f "$tmp/w.$f" > /dev/null 2> "$tmp/why" && ok || bad "hostile path -o $f: rc=$rc $(cat "$tmp/err" "$tmp/why")"
done
python3 - "$tmp/w.json" "$weird/m.gguf" <<'EOF' && ok || bad "hostile path: model_filename does not round-trip"
import json, os, sys
r = json.load(open(sys.argv[1], encoding="utf-8"))[0]
want = os.fsencode(sys.argv[2]).decode("utf-8", "replace")
assert r["model_filename"] == want, (r["model_filename"], want)
EOF
"$sb" bench $tiny -m "$weird/m.gguf" > "$tmp/w.md" 2>&1 && ! grep -q "$(printf '\033')" "$tmp/w.md" && ok || bad "hostile path md"

# ---- a crafted general.name: same length as the embedded one, quotes, an escape code, bad UTF-8 ----
python3 - "$model" "$tmp/name.gguf" <<'EOF' || bad "cannot craft general.name"
import struct, sys
b = open(sys.argv[1], "rb").read()
old = b"sonicboom-kjv-13m"
new = b'a"b\\c\nd\x1b[31m\xff\xfezzz'
assert len(new) == len(old)
i = b.index(struct.pack("<Q", len(old)) + old)
open(sys.argv[2], "wb").write(b[:i + 8] + new + b[i + 8 + len(old):])
EOF
"$sb" info "$tmp/name.gguf" | grep -q 'general.name' && ok || bad "crafted file does not parse"
for f in json jsonl csv sql; do
    "$sb" bench $tiny -o $f -m "$tmp/name.gguf" > "$tmp/n.$f" 2> "$tmp/err"; rc=$?
    [ $rc = 0 ] && check $f "$tmp/n.$f" > /dev/null 2> "$tmp/why" && ! grep -q "$(printf '\033')" "$tmp/n.$f" \
        && ok || bad "crafted general.name -o $f: rc=$rc $(cat "$tmp/err" "$tmp/why")"
done
"$sb" bench $tiny -m "$tmp/name.gguf" > "$tmp/n.md" 2>&1 && ! grep -q "$(printf '\033')" "$tmp/n.md" && ok || bad "crafted name md"

# ---- lists: the cross product, in llama-bench's order (threads, depth, then pp, tg, pg) ----
"$sb" bench -p 8,16 -n 4 -d 0,8 -t 1,2 -r 1 -o jsonl > "$tmp/x" 2> "$tmp/err"; rc=$?
check jsonl "$tmp/x" | cut -d' ' -f1-4 > "$tmp/rows"
[ $rc = 0 ] && [ "$(tr '\n' ';' < "$tmp/rows")" = "8 0 0 1;16 0 0 1;0 4 0 1;8 0 8 1;16 0 8 1;0 4 8 1;8 0 0 2;16 0 0 2;0 4 0 2;8 0 8 2;16 0 8 2;0 4 8 2;" ] \
    && ok || bad "cross product: rc=$rc $(tr '\n' ';' < "$tmp/rows") $(cat "$tmp/err")"
# ranges: first-last+step, first-last*mult; a 0 skips its tests (llama-bench)
"$sb" bench -p 4-8+4 -n 0,2-8*2 -r 1 -t 1 --no-warmup -o csv > "$tmp/x" 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && [ "$(check csv "$tmp/x" | cut -d' ' -f1-2 | tr '\n' ';')" = "4 0;8 0;0 2;0 4;0 8;" ] && ok || bad "ranges: rc=$rc $(cat "$tmp/x" "$tmp/err")"
# several models, one after another (-m twice, and a comma list of paths that do not exist as one)
cp "$model" "$tmp/b.gguf"
"$sb" bench -p 8 -n 0 -r 1 -t 1 -m "$model" -m "$tmp/b.gguf" -o json > "$tmp/x" 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && [ "$(check json "$tmp/x" | sed 's/.*|//' | tr '\n' ';')" = "$model;$tmp/b.gguf;" ] && ok || bad "-m twice: rc=$rc $(cat "$tmp/err")"
"$sb" bench -p 8 -n 0 -r 1 -t 1 -m "$tmp/b.gguf,$model" -o jsonl > "$tmp/x" 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && [ "$(check jsonl "$tmp/x" | wc -l)" = 2 ] && ok || bad "-m a,b: rc=$rc $(cat "$tmp/err")"

# ---- -pg: prompt then generation in one test; -d appends " @ dN" ----
"$sb" bench -p 0 -n 0 -pg 8,4 -pg 4,2 -d 0,8 -r 1 -t 1 --bw 10 > "$tmp/md" 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && grep -q '|  *pp8+tg4 |' "$tmp/md" && grep -q '|  *pp4+tg2 |' "$tmp/md" && grep -q '|  *pp8+tg4 @ d8 |' "$tmp/md" \
    && [ "$(grep -c '^| llama' "$tmp/md")" = 4 ] && ok || bad "-pg md: rc=$rc $(cat "$tmp/md" "$tmp/err")"
"$sb" bench -p 0 -n 0 -pg 8,4 -r 2 -t 1 -o json > "$tmp/x" 2>&1 && [ "$(check json "$tmp/x" | sed 's/|.*//')" = "8 4 0 1 llama ?B Q8_0" ] \
    && python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))[0]; assert abs(r["avg_ts"] - sum(12e9/n for n in r["samples_ns"])/2) < 1e-6*r["avg_ts"]' "$tmp/x" \
    && ok || bad "-pg json: $(cat "$tmp/x")"

# ---- --prefix: a note under the md table; the row "pp N @ d P" in the machine formats ----
"$sb" bench -p 0 -n 0 --prefix 16,4 -r 1 -t 1 --bw 10 > "$tmp/md" 2>&1 && grep -q '^first token after a cached 16-token prefix + 4 new tokens: [0-9.]* ± [0-9.]* ms' "$tmp/md" \
    && ok || bad "--prefix md: $(cat "$tmp/md")"
"$sb" bench -p 0 -n 0 --prefix 16,4 -r 1 -t 1 -o jsonl > "$tmp/x" 2>&1 && [ "$(check jsonl "$tmp/x" | cut -d' ' -f1-3)" = "4 0 16" ] && ok || bad "--prefix jsonl: $(cat "$tmp/x")"

# ---- -fa: 0 runs with a note (always flash attention here), recorded as on; --progress ----
"$sb" bench $tiny -fa 0,1 -o json > "$tmp/x" 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && [ "$(check json "$tmp/x" | wc -l)" = 2 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -q '^sb bench: note: -fa 0: ' "$tmp/err" \
    && ok || bad "-fa 0,1: rc=$rc $(cat "$tmp/err")"
"$sb" bench $tiny --progress -o csv > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && grep -q '^sb bench: benchmark 1/2: starting$' "$tmp/err" && grep -q '^sb bench: benchmark 2/2: timed run 1/1$' "$tmp/err" \
    && ok || bad "--progress: $(cat "$tmp/err")"

# ---- usage errors: one line, exit 2 ----
usage_err() {
    label=$1
    shift
    "$sb" bench "$@" > "$tmp/out" 2> "$tmp/err"; rc=$?
    [ $rc = 2 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -q '^sb bench: ' "$tmp/err" && [ ! -s "$tmp/out" ] \
        && ok || bad "$label: rc=$rc $(cat "$tmp/err")"
}
usage_err "-p 8,,16" -p 8,,16
usage_err "-p 8," -p 8,
usage_err "-p abc" -p abc
usage_err "-p 8-4" -p 8-4
usage_err "-p -8" -p -8
usage_err "-n 2-8*1" -n 2-8*1
usage_err "-n 0-8*2" -n 0-8*2
usage_err "-d 1-9+0" -d 1-9+0
usage_err "-t 0" -t 0
usage_err "-pg 8" -pg 8
usage_err "-pg 8,4,2" -pg 8,4,2
usage_err "-o xml" -o xml
usage_err "-oe xml" -oe xml
usage_err "-fa maybe" -fa maybe
usage_err "-fa 1,,0" -fa 1,,0
usage_err "-ctk q4_0" -ctk q4_0
usage_err "-ctk f32 -ctv f16" -ctk f32 -ctv f16
usage_err "-r 0" -r 0
usage_err "--prefix 8,0" --prefix 8,0
usage_err "-p without a value" -p
usage_err "unknown option" --bogus
usage_err "too many values" -p 1-65
usage_err "-lm dio" -lm dio
usage_err "-lm mmap,none" -lm mmap,none
usage_err "-lm without a value" -lm
# -lm none: the model read into memory (llama-bench's load_mode none), the same tests and rows
"$sb" bench $tiny -lm none -o json > "$tmp/lm.json" 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && check json "$tmp/lm.json" > /dev/null && python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert len(r)==2 and all(x["load_mode"]=="none" for x in r)' "$tmp/lm.json" \
    && ok || bad "-lm none: rc=$rc $(cat "$tmp/err")"
"$sb" bench $tiny --load-mode auto -o json > "$tmp/lm.json" 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && python3 -c 'import json,sys; assert all(x["load_mode"]=="mmap" for x in json.load(open(sys.argv[1])))' "$tmp/lm.json" \
    && ok || bad "--load-mode auto: rc=$rc $(cat "$tmp/err")"
# a model that does not load: one error line, exit 1, and the json so far still valid
"$sb" bench $tiny -o json -m "$tmp/missing.gguf" > "$tmp/x" 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -q '^error: SB_ERR_IO: ' "$tmp/err" && check json "$tmp/x" > /dev/null \
    && ok || bad "missing model: rc=$rc $(cat "$tmp/err" "$tmp/x")"
finish
