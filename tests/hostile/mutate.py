#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""tests/hostile/mutate.py — the model-file mutator of the hostile-input suite.

Reads one small valid GGUF file, and writes mutated copies of it: hyperparameters set to 0, -1,
huge, NaN, the wrong type or removed; vocabulary damage (counts that disagree, special ids past
the vocabulary, a gpt2 vocabulary without merges, token text with control bytes / invalid UTF-8 /
ANSI escapes / huge text); tensor damage (missing, wrong shape, wrong type, NaN in a norm, Inf in an
embedding row, extra blocks, MoE experts); truncations; hostile general.name values. Nothing is
committed as a binary: the suite generates every file at test time into its temp dir.

Each mutation is a Mutation(id, cls, what, expect, regex, apply): apply(Gguf) changes the parsed
file in place (or returns bytes, for truncations); expect/regex say what loading it must give
(see run.py for their meaning). `mutations(g)` lists those that apply to a parsed base file.

Command line: mutate.py BASE.gguf OUTDIR [ID...]  writes OUTDIR/ID.gguf for each (default: all)
and prints "ID<TAB>class<TAB>expect<TAB>regex" lines.
"""
import copy
import math
import os
import struct
import sys

# GGUF metadata value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B",
              U64: "<Q", I64: "<q", F64: "<d"}
# ggml tensor types this script can size: id -> (block elements, block bytes)
TYPE_SIZE = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
             10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 24: (1, 1),
             25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 30: (1, 2)}
F32_T, F16_T, Q8_0_T, I32_T = 0, 1, 8, 26


class Gguf:
    """A parsed GGUF file: kv is a list of [key, type, value] (arrays: value = (elem_type, list)),
    tensors a list of dicts {name, dims, type, data}."""

    def __init__(self, blob):
        self.pos = 0
        self.blob = blob
        if self._take(4) != b"GGUF":
            raise ValueError("not a GGUF file")
        self.version, n_tensors, n_kv = struct.unpack("<IQQ", self._take(20))
        self.kv = []
        for _ in range(n_kv):
            key = self._str().decode("utf-8", "surrogateescape")
            t = self._u32()
            self.kv.append([key, t, self._value(t)])
        infos = []
        for _ in range(n_tensors):
            name = self._str().decode()
            nd = self._u32()
            dims = list(struct.unpack("<%dQ" % nd, self._take(8 * nd)))
            t = self._u32()
            off = struct.unpack("<Q", self._take(8))[0]
            infos.append((name, dims, t, off))
        align = self.get("general.alignment", 32)
        data0 = (self.pos + align - 1) // align * align
        self.tensors = []
        for name, dims, t, off in infos:
            n = nbytes(dims, t)
            self.tensors.append({"name": name, "dims": dims, "type": t, "data": bytes(blob[data0 + off:data0 + off + n])})
        del self.blob

    def _take(self, n):
        b = self.blob[self.pos:self.pos + n]
        self.pos += n
        return b

    def _u32(self):
        return struct.unpack("<I", self._take(4))[0]

    def _str(self):
        n = struct.unpack("<Q", self._take(8))[0]
        return self._take(n)

    def _value(self, t):
        if t == STR:
            return self._str()
        if t == ARR:
            et = self._u32()
            n = struct.unpack("<Q", self._take(8))[0]
            if et == STR:
                return (et, [self._str() for _ in range(n)])
            fmt = SCALAR_FMT[et]
            sz = struct.calcsize(fmt)
            return (et, list(struct.unpack("<%d%s" % (n, fmt[1]), self._take(n * sz))))
        return struct.unpack(SCALAR_FMT[t], self._take(struct.calcsize(SCALAR_FMT[t])))[0]

    def clone(self):
        """A copy that mutations may edit: the kv and tensor lists and entries are new, the values
        (bytes, tuples, lists) are shared, so mutations replace values instead of editing them."""
        c = copy.copy(self)
        c.kv = [list(kv) for kv in self.kv]
        c.tensors = [dict(t) for t in self.tensors]
        return c

    # ---- editing ----
    def find(self, key):
        for i, kv in enumerate(self.kv):
            if kv[0] == key:
                return i
        return -1

    def get(self, key, default=None):
        i = self.find(key)
        if i < 0:
            return default
        v = self.kv[i][2]
        return v.decode("utf-8", "replace") if isinstance(v, bytes) else v

    def set(self, key, t, value):
        i = self.find(key)
        if i < 0:
            self.kv.append([key, t, value])
        else:
            self.kv[i] = [key, t, value]

    def remove(self, key):
        self.kv = [kv for kv in self.kv if kv[0] != key]

    def tensor(self, name):
        for t in self.tensors:
            if t["name"] == name:
                return t
        return None

    # ---- writing ----
    def to_bytes(self):
        out = bytearray(b"GGUF")
        out += struct.pack("<IQQ", self.version, len(self.tensors), len(self.kv))
        for key, t, v in self.kv:
            out += _pack_str(key.encode("utf-8", "surrogateescape"))
            out += struct.pack("<I", t)
            out += _pack_value(t, v)
        align = self.get("general.alignment", 32)
        if not isinstance(align, int) or align <= 0 or align & (align - 1):
            align = 32  # a mutated alignment is the parser's business; lay the data out at 32
        off = 0
        offsets = []
        for t in self.tensors:
            offsets.append(off)
            off += (len(t["data"]) + align - 1) // align * align
        for t, o in zip(self.tensors, offsets):
            out += _pack_str(t["name"].encode())
            out += struct.pack("<I", len(t["dims"]))
            out += struct.pack("<%dQ" % len(t["dims"]), *t["dims"])
            out += struct.pack("<IQ", t["type"], o)
        out += b"\0" * (-len(out) % align)
        for t in self.tensors:
            out += t["data"]
            out += b"\0" * (-len(t["data"]) % align)
        return bytes(out)


def _pack_str(b):
    return struct.pack("<Q", len(b)) + b


_PACKED = {}  # (type, id(value)) -> (value, bytes): clones share their big arrays, so pack each once


def _pack_value(t, v):
    if t == ARR and len(v[1]) > 64:
        hit = _PACKED.get((t, id(v)))
        if hit is None or hit[0] is not v:
            hit = _PACKED[(t, id(v))] = (v, _pack_value_raw(t, v))
        return hit[1]
    return _pack_value_raw(t, v)


def _pack_value_raw(t, v):
    if t == STR:
        return _pack_str(v if isinstance(v, bytes) else v.encode())
    if t == ARR:
        et, items = v
        head = struct.pack("<IQ", et, len(items))
        if et == STR:
            return head + b"".join(_pack_str(x if isinstance(x, bytes) else x.encode()) for x in items)
        return head + struct.pack("<%d%s" % (len(items), SCALAR_FMT[et][1]), *items)
    return struct.pack(SCALAR_FMT[t], v)


def nbytes(dims, t):
    be, bb = TYPE_SIZE[t]
    n = 1
    for d in dims:
        n *= d
    return n // be * bb


def resize(t, dims, type_=None):
    """Give tensor t new dims (and type), keeping its data where it fits, zero-padding the rest."""
    t["dims"] = list(dims)
    if type_ is not None:
        t["type"] = type_
    n = nbytes(t["dims"], t["type"])
    t["data"] = (t["data"] + b"\0" * n)[:n]


class Mutation:
    def __init__(self, id_, cls, what, expect, regex, apply, cmds="load"):
        self.id, self.cls, self.what, self.expect, self.regex, self.apply, self.cmds = id_, cls, what, expect, regex, apply, cmds

    def build(self, g):
        """The mutated file's bytes (g is not changed)."""
        m = g.clone()
        r = self.apply(m)
        return r if isinstance(r, (bytes, bytearray)) else m.to_bytes()


# Regexes for expected messages: specific about the status family and the named key/tensor, loose
# about wording the fixing helpers choose.
HP = r"SB_ERR_(MODEL_HPARAM|MODEL_TENSOR_SHAPE|FORMAT_KEY_TYPE|RANGE|INVALID_ARG)\b.*%s"
VOC = r"SB_ERR_(VOCAB\w*|FORMAT_KEY_TYPE|MODEL_HPARAM|RANGE)\b.*%s"


def _hparam_mutations(g):
    arch = g.get("general.architecture")
    out = []
    for key, t, v in list(g.kv):
        if not key.startswith(arch + ".") or t == ARR:
            continue
        short = key[len(arch) + 1:]
        kre = short.split(".")[-1]  # the key's last part: messages may drop the arch prefix
        if short in ("attention.head_count", "attention.head_count_kv", "embedding_length", "feed_forward_length",
                     "rope.dimension_count"):
            kre = "(%s|blk\\.\\d+\\.\\w+|head.?dim|dimension_count)" % kre  # or a tensor whose shape no longer fits, named
        ctx_len = short == "context_length"
        isf = t in (F32, F64)
        def setter(val, typ):
            return lambda m, k=key: m.set(k, typ, val)
        cases = [("zero", 0.0 if isf else 0, t), ("huge", 1e30 if isf else (2**32 - 1 if t == U32 else 2**31 - 1), t)]
        if isf:
            cases += [("nan", float("nan"), t), ("inf", float("inf"), t), ("neg", -1.0, t)]
        else:
            cases += [("neg", -1, I32), ("u64big", 2**63 + 5, U64)]
        cases += [("str", b"12", STR), ("arr", (U32, [1, 2]), ARR)]
        for name, val, typ in cases:
            # freq_base/epsilon/rope dims etc.: every listed value is out of range or of the wrong type.
            expect, rx = "1", HP % kre
            if ctx_len and name == "huge":
                expect, rx = "01", HP % kre  # a huge trained context is legal if the session caps n_ctx
            if short == "rope.freq_base" and name == "huge":
                expect, rx = "01", HP % kre  # 1e30: finite and > 0, rotations near identity; llama.cpp runs it too
            out.append(Mutation("hp-%s-%s" % (short, name), "nonsense", "%s = %s" % (key, name), expect, rx, setter(val, typ)))
        out.append(Mutation("hp-%s-missing" % short, "nonsense", "%s removed" % key,
                            "01" if short in ("rope.freq_base", "rope.dimension_count", "attention.head_count_kv",
                                              "attention.layer_norm_rms_epsilon", "vocab_size", "context_length") else "1",
                            HP % kre, lambda m, k=key: m.remove(k)))
    return out


def _vocab_mutations(g, prefix="vm"):
    out = []
    toks = g.get("tokenizer.ggml.tokens")
    if not toks:
        return out
    n = len(toks[1])
    M = lambda id_, cls, what, expect, rx, fn: out.append(Mutation("%s-%s" % (prefix, id_), cls, what, expect, rx, fn, "vocab"))

    def shorten(key, k):
        def f(m):
            et, items = m.get(key)
            m.set(key, ARR, (et, items[:k]))
        return f
    for key in ("tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
        if g.find(key) >= 0:
            short = key.split(".")[-1]
            M("%s-short" % short, "nonsense", "%s has fewer entries than tokens" % key, "1", VOC % short, shorten(key, n // 2))
            M("%s-empty" % short, "nonsense", "%s empty" % key, "1", VOC % short, shorten(key, 0))
            M("%s-str" % short, "nonsense", "%s a string" % key, "1", VOC % short, lambda m, k=key: m.set(k, STR, b"x"))
    M("tokens-empty", "nonsense", "no tokens", "1", VOC % "tokens", lambda m: m.set("tokenizer.ggml.tokens", ARR, (STR, [])))
    M("tokens-u32", "nonsense", "tokens array of u32", "1", VOC % "tokens", lambda m: m.set("tokenizer.ggml.tokens", ARR, (U32, list(range(n)))))
    M("tokens-missing", "nonsense", "tokens key removed", "1", VOC % "tokens", lambda m: m.remove("tokenizer.ggml.tokens"))
    for sp in ("bos", "eos", "unknown", "padding"):
        key = "tokenizer.ggml.%s_token_id" % sp
        for name, val, typ in (("n", n, U32), ("big", 2**32 - 1, U32), ("neg", -5, I32)):
            M("%s-%s" % (sp, name), "security", "%s = %s (n_vocab %d)" % (key, val, n), "1",
              VOC % (sp + "_token_id"), lambda m, k=key, v=val, t=typ: m.set(k, t, v))
    M("model-missing", "nonsense", "tokenizer.ggml.model removed", "1", VOC % "model", lambda m: m.remove("tokenizer.ggml.model"))
    M("model-unknown", "nonsense", "tokenizer.ggml.model = bogus", "1", r"SB_ERR_VOCAB_UNSUPPORTED\b.*bogus",
      lambda m: m.set("tokenizer.ggml.model", STR, b"bogus"))
    M("model-ansi", "security", "tokenizer.ggml.model with ANSI codes", "1", r"SB_ERR_VOCAB_UNSUPPORTED",
      lambda m: m.set("tokenizer.ggml.model", STR, b"\x1b[31mred\x1b[0m\x07"))
    if g.get("tokenizer.ggml.model") == "gpt2":
        M("merges-missing", "nonsense", "gpt2 vocabulary without merges", "1", VOC % "merges", lambda m: m.remove("tokenizer.ggml.merges"))
        M("merges-bad", "nonsense", "merges naming tokens that do not exist", "1", VOC % "merges",
          lambda m: m.set("tokenizer.ggml.merges", ARR, (STR, [b"\xff\xfe zz", b"nospace"] * 4)))
        M("pre-missing", "nonsense", "tokenizer.ggml.pre removed", "01", r"SB_ERR_VOCAB\w*\b.*pre",
          lambda m: m.remove("tokenizer.ggml.pre"))
        M("pre-unknown", "nonsense", "tokenizer.ggml.pre = bogus", "1", r"SB_ERR_VOCAB_UNSUPPORTED\b.*bogus",
          lambda m: m.set("tokenizer.ggml.pre", STR, b"bogus"))

    def tok_text(i, b):
        def f(m):
            et, items = m.get("tokenizer.ggml.tokens")
            items = list(items)
            items[i] = b
            m.set("tokenizer.ggml.tokens", ARR, (et, items))
        return f
    last = n - 1
    # Hostile token text: loading must either refuse with a VOCAB error or work (and never print it raw).
    M("tok-ctrl", "security", "a token with control bytes", "01", VOC % "token", tok_text(last, b"a\x01\x02\x7f\x1b[2Jb"))
    M("tok-badutf8", "security", "a token of invalid UTF-8", "01", VOC % "token", tok_text(last, b"\xff\xc0\x80\xed\xa0\x80"))
    M("tok-ansi", "security", "a token with an ANSI title escape", "01", VOC % "token", tok_text(last, b"\x1b]0;pwned\x07"))
    M("tok-empty", "nonsense", "an empty token text", "01", VOC % "token", tok_text(last, b""))
    M("tok-nul", "nonsense", "a token holding a NUL byte", "01", VOC % "token", tok_text(last, b"a\0b"))
    M("tok-huge", "hang", "a 16 MiB token text", "01", VOC % "token", tok_text(last, b"x" * (16 << 20)))
    M("tok-bytefallback-bad", "security", "a byte token <0x-1>", "01", VOC % "token", tok_text(min(3, last), b"<0x-1>"))
    M("tok-dup", "nonsense", "two tokens with the same text", "01", VOC % "token", tok_text(last, toks[1][last - 1]))
    return out


def _nan_tensor(name, val, cls="nonsense"):
    def f(m):
        t = m.tensor(name)
        if t["type"] == F32_T:
            t["data"] = struct.pack("<f", val) + t["data"][4:]
        elif t["type"] == Q8_0_T:  # row 0's first block scale (f16) to NaN/Inf
            h = 0x7E00 if math.isnan(val) else 0x7C00
            t["data"] = struct.pack("<H", h) + t["data"][2:]
        else:
            t["data"] = struct.pack("<H", 0x7E00 if math.isnan(val) else 0x7C00) + t["data"][2:]
    return f


def _tensor_mutations(g):
    arch = g.get("general.architecture")
    out = []
    M = lambda id_, cls, what, expect, rx, fn: out.append(Mutation("tm-" + id_, cls, what, expect, rx, fn))
    names = [t["name"] for t in g.tensors]
    n_layer = g.get(arch + ".block_count")
    TM = r"SB_ERR_MODEL_TENSOR_MISSING\b.*%s"
    TS = r"SB_ERR_MODEL_TENSOR_SHAPE\b.*%s"
    for name in ("token_embd.weight", "output_norm.weight", "blk.0.attn_q.weight", "blk.%d.ffn_down.weight" % (n_layer - 1),
                 "blk.0.attn_norm.weight"):
        if name in names:
            M("missing-" + name, "nonsense", name + " removed", "1", TM % name.replace(".", r"\."),
              lambda m, x=name: setattr(m, "tensors", [t for t in m.tensors if t["name"] != x]))
    for name in ("token_embd.weight", "blk.0.attn_k.weight", "blk.0.ffn_up.weight", "output_norm.weight", "blk.0.attn_norm.weight"):
        if name not in names:
            continue
        dims = g.tensor(name)["dims"]
        rx = TS % name.replace(".", r"\.")
        if len(dims) == 2:
            M("shape-swap-" + name, "nonsense", name + " transposed", "1", rx, lambda m, x=name: resize(m.tensor(x), m.tensor(x)["dims"][::-1]))
            M("shape-3d-" + name, "nonsense", name + " with a third dimension", "1", rx,
              lambda m, x=name: resize(m.tensor(x), m.tensor(x)["dims"] + [2]))
        M("shape-small-" + name, "nonsense", name + " half its rows", "1", rx,
          lambda m, x=name: resize(m.tensor(x), m.tensor(x)["dims"][:-1] + [max(1, m.tensor(x)["dims"][-1] // 2)]) if len(m.tensor(x)["dims"]) > 1
          else resize(m.tensor(x), [m.tensor(x)["dims"][0] // 2]))
    # wrong types: a norm as an integer tensor, the embedding as I32
    for name in ("output_norm.weight", "token_embd.weight"):
        if name in names:
            M("type-i32-" + name, "nonsense", name + " stored as I32", "1", r"SB_ERR_MODEL_TENSOR_TYPE\b.*%s" % name.replace(".", r"\."),
              lambda m, x=name: resize(m.tensor(x), m.tensor(x)["dims"], I32_T))
    # NaN / Inf values
    for name in ("output_norm.weight", "blk.0.attn_norm.weight", "blk.0.ffn_norm.weight"):
        if name in names:
            M("nan-" + name, "nonsense", "NaN in " + name, "1", r"SB_ERR_MODEL_NAN\b.*%s" % name.replace(".", r"\."), _nan_tensor(name, float("nan")))
            M("inf-" + name, "nonsense", "Inf in " + name, "1", r"SB_ERR_MODEL_NAN\b.*%s" % name.replace(".", r"\."), _nan_tensor(name, float("inf")))
    if "token_embd.weight" in names:
        # a big matrix: by default it may load, but generating through the row must not succeed silently
        M("inf-token_embd", "nonsense", "Inf in token_embd row 0", "01", r"SB_ERR_MODEL_NAN\b|NaN|Inf", _nan_tensor("token_embd.weight", float("inf")))
    # structure: extra layers beyond block_count, and block_count smaller than the tensors present
    def extra_block(m):
        for t in list(m.tensors):
            if t["name"].startswith("blk.0."):
                c = copy.deepcopy(t)
                c["name"] = "blk.%d.%s" % (n_layer, t["name"][6:])
                m.tensors.append(c)
    M("extra-block", "nonsense", "blk.%d.* tensors beyond block_count" % n_layer, "1",
      r"SB_ERR_(MODEL\w*|FORMAT\w*)\b.*blk\.%d|block_count" % n_layer, extra_block)
    if n_layer > 1:
        M("block_count-1", "nonsense", "block_count 1 with blk.1.* present", "1", r"SB_ERR_(MODEL\w*|FORMAT\w*)\b.*(blk\.1|block_count)",
          lambda m: m.set(arch + ".block_count", U32, 1))
    M("unknown-tensor", "nonsense", "an unknown tensor name", "01", r"SB_ERR_MODEL\w*\b.*bogus",
      lambda m: m.tensors.append({"name": "bogus.weight", "dims": [32], "type": F32_T, "data": b"\0" * 128}))

    def moe(m):
        m.set(arch + ".expert_count", U32, 4)
        m.set(arch + ".expert_used_count", U32, 2)
        emb = g.get(arch + ".embedding_length")
        for k in ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"):
            m.tensors.append({"name": "blk.0.%s.weight" % k, "dims": [emb, 32, 4] if k != "ffn_down_exps" else [32, emb, 4],
                              "type": F32_T, "data": b"\0" * (emb * 32 * 4 * 4)})
        m.tensors.append({"name": "blk.0.ffn_gate_inp.weight", "dims": [emb, 4], "type": F32_T, "data": b"\0" * (emb * 16)})
    M("moe", "nonsense", "expert_count 4 with *_exps tensors (MoE)", "1", r"SB_ERR_(UNSUPPORTED|MODEL\w*)\b.*(expert|MoE|moe)", moe)
    M("moe-key-only", "nonsense", "expert_count 8 without expert tensors", "1", r"SB_ERR_(UNSUPPORTED|MODEL\w*)\b.*(expert|MoE|moe)",
      lambda m: m.set(arch + ".expert_count", U32, 8))
    # vocabulary vs embedding
    toks = g.get("tokenizer.ggml.tokens")
    if toks:
        n = len(toks[1])

        def few_tokens(m):
            for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
                if m.find(key) >= 0:
                    et, items = m.get(key)
                    m.set(key, ARR, (et, items[:n // 4]))
            for key in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id"):
                if m.find(key) >= 0:
                    m.set(key, U32, 0)
            if m.find(arch + ".vocab_size") >= 0:
                m.set(arch + ".vocab_size", U32, n // 4)
        M("vocab-lt-embd", "nonsense", "%d tokens for a %d-row embedding" % (n // 4, n), "1",
          r"SB_ERR_(VOCAB\w*|MODEL\w*)\b.*(vocab|token_embd|n_vocab)", few_tokens)
    M("arch-unknown", "nonsense", "general.architecture = bogus", "1", r"SB_ERR_MODEL_ARCH\b.*bogus",
      lambda m: m.set("general.architecture", STR, b"bogus"))
    M("arch-ansi", "security", "general.architecture with ANSI codes", "1", r"SB_ERR_MODEL_ARCH",
      lambda m: m.set("general.architecture", STR, b"\x1b[2J\x1b]0;x\x07evil"))
    M("arch-missing", "nonsense", "general.architecture removed", "1", r"SB_ERR_(MODEL_ARCH|MODEL_HPARAM|NOT_FOUND)\b.*architecture",
      lambda m: m.remove("general.architecture"))
    return out


def _name_mutations(g):
    out = []
    for id_, val in (("quote", b'evil", "injected": "1'), ("backslash", b"a\\\\b\\\"c"), ("newline", b"line1\nline2\r\nerror: fake"),
                     ("ansi", b"\x1b[31mred\x1b[0m\x1b]0;title\x07"), ("badutf8", b"\xff\xfe\xc3\x28"), ("nul", b"a\0b"),
                     ("long", b"N" * 100000)):
        out.append(Mutation("name-" + id_, "security", "general.name " + id_, "0", "", lambda m, v=val: m.set("general.name", STR, v), "meta"))
    out.append(Mutation("key-ansi", "security", "a metadata key and value holding ANSI escapes", "0", "",
                        lambda m: m.set("general.\x1b[2J\x1b]0;pwned\x07evil", STR, b"\x1b[31mred\r\x08\x08"), "meta"))
    out.append(Mutation("key-badutf8", "security", "a metadata key of invalid UTF-8", "0", "",
                        lambda m: m.set("general.\udcff\udcfeodd", STR, b"v"), "meta"))
    return out


def _truncations(g):
    full = g.to_bytes()
    n = len(full)
    out = []
    header_end = len(full) - sum((len(t["data"]) + 31) // 32 * 32 for t in g.tensors)
    for off in (0, 3, 4, 8, 16, 23, 24, 40, header_end // 3, header_end // 2, header_end - 1, header_end, header_end + 1,
                n // 2, n - 4096, n - 1):
        if 0 <= off < n:
            out.append(Mutation("trunc-%d" % off, "crash", "truncated to %d of %d bytes" % (off, n), "1",
                                r"SB_ERR_FORMAT_\w+\b", lambda m, o=off: full[:o], "load"))
    return out


def mutations(g):
    return _hparam_mutations(g) + _vocab_mutations(g) + _tensor_mutations(g) + _name_mutations(g) + _truncations(g)


def vocab_mutations(g):
    """Vocabulary-only mutations of a vocab file (e.g. the shared gpt2-type qwen2 vocabulary)."""
    return _vocab_mutations(g, "vv")


def main(argv):
    if len(argv) < 3:
        print(__doc__.split("\n\n")[-1], file=sys.stderr)
        return 2
    with open(argv[1], "rb") as f:
        g = Gguf(f.read())
    want = set(argv[3:])
    os.makedirs(argv[2], exist_ok=True)
    for m in mutations(g) + (vocab_mutations(g) if g.get("general.architecture") is None else []):
        if want and m.id not in want:
            continue
        with open(os.path.join(argv[2], m.id + ".gguf"), "wb") as f:
            f.write(m.build(g))
        print("%s\t%s\t%s\t%s" % (m.id, m.cls, m.expect, m.regex))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
