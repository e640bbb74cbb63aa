#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""tests/runtime/make_imatrix.py — write an llama.cpp imatrix GGUF (the llama-imatrix layout:
NAME.in_sum2 F32 [n_per_row, n_mat], NAME.counts F32 [1, n_mat], keys imatrix.datasets,
imatrix.chunk_count, imatrix.chunk_size) for the weight tensors of a model, or a deliberately
broken one, for the `sb quantize --imatrix` tests.

usage: make_imatrix.py MODE OUT < model.json     (model.json: `sb info --json MODEL`)
MODE: valid | wrong-name | wrong-length | nan | negative | bad-count | unpaired | no-meta |
      truncated | legacy | bad-type | uniform | bad-shape | count-len | stray
Importances are deterministic and uneven (every 16th column weighs ~40x more) so that they change
the quantization.
"""
import json
import math
import struct
import sys

GGUF_U32, GGUF_STR, GGUF_ARR = 4, 8, 9
F32, F16 = 0, 1


def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def kv_u32(k, v):
    return s(k) + struct.pack("<II", GGUF_U32, v)


def kv_str_arr(k, vals):
    out = s(k) + struct.pack("<IIQ", GGUF_ARR, GGUF_STR, len(vals))
    for v in vals:
        out += s(v)
    return out


def gguf(kvs, tensors):
    """tensors: list of (name, shape list, type, bytes)"""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    off, infos, data = 0, b"", b""
    for name, shape, typ, raw in tensors:
        infos += s(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
        infos += struct.pack("<IQ", typ, off)
        pad = (-len(raw)) % 32
        data += raw + b"\0" * pad
        off += len(raw) + pad
    meta = head + infos
    meta += b"\0" * ((-len(meta)) % 32)
    return meta + data


def main():
    mode, out = sys.argv[1], sys.argv[2]
    model = json.load(sys.stdin)
    weights = [t for t in model["tensors"] if len(t["shape"]) >= 2 and t["name"].endswith(".weight")]
    tensors = []
    for t in weights:
        n_per_row = t["shape"][0]
        n_mat = t["shape"][2] if len(t["shape"]) > 2 else 1
        count = 10.0
        vals = []
        for j in range(n_mat):
            for i in range(n_per_row):
                imp = 1.0 if mode == "uniform" else math.exp(3.0 * ((i * 7919 + j * 104729) % 1000) / 1000.0) * (40.0 if i % 16 == 3 else 1.0)
                vals.append(imp * count)
        counts = [count] * n_mat
        name = t["name"]
        if mode == "wrong-length" and name == weights[-1]["name"]:
            vals = vals[: n_per_row - 32] if n_mat == 1 else vals
            n_per_row -= 32
        if mode == "nan" and name == weights[0]["name"]:
            vals[5] = float("nan")
        if mode == "negative" and name == weights[0]["name"]:
            vals[7] = -1.0
        if mode == "bad-count" and name == weights[0]["name"]:
            counts[0] = 2.5
        tensors.append((name + ".in_sum2", [n_per_row, n_mat], F32, struct.pack("<%df" % len(vals), *vals)))
        if not (mode == "unpaired" and name == weights[0]["name"]):
            ctype, craw = (F16, struct.pack("<%de" % n_mat, *counts)) if mode == "bad-type" else (F32, struct.pack("<%df" % n_mat, *counts))
            tensors.append((name + ".counts", [1, n_mat], ctype, craw))
    if mode == "bad-shape":
        name, shape, typ, raw = tensors[0]
        tensors[0] = (name, [shape[0], 1, 1, 2], typ, raw + raw)
    if mode == "count-len":
        tensors[1] = (tensors[1][0], [2, 1], F32, struct.pack("<2f", 10.0, 10.0))
    if mode == "stray":
        tensors.append(("token_embd.weight.stats", [4, 1], F32, struct.pack("<4f", 1, 2, 3, 4)))
    if mode == "wrong-name":
        tensors.append(("blk.99.ffn_down.weight.in_sum2", [16, 1], F32, struct.pack("<16f", *([1.0] * 16))))
        tensors.append(("blk.99.ffn_down.weight.counts", [1, 1], F32, struct.pack("<f", 1.0)))
    kvs = [] if mode == "no-meta" else [
        kv_str_arr("imatrix.datasets", ["calibration.txt"]),
        kv_u32("imatrix.chunk_count", 42),
        kv_u32("imatrix.chunk_size", 512),
    ]
    blob = gguf(kvs, tensors)
    if mode == "truncated":
        blob = blob[: len(blob) - 100]
    if mode == "legacy":
        blob = struct.pack("<i", 1) + s("x")[4:] + b"\0" * 16
    with open(out, "wb") as f:
        f.write(blob)


if __name__ == "__main__":
    main()
