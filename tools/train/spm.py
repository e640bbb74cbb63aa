# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""llama.cpp's SentencePiece-style ("llama") tokenizer, re-implemented in Python.

Development tool for the embedded model (issue 7): the training data is tokenized
with THIS code so that train-time token ids equal what a llama.cpp-compatible
runtime (SonicBoom's tok layer) produces from the GGUF tokenizer metadata.
Algorithm (shared/docs/architectures.md §8.2, §8.5): optional BOS; USER_DEFINED
tokens split the text (CONTROL/UNKNOWN are not parsed: parse_special = false);
each raw fragment gets one leading space if add_space_prefix and it is first or
follows a special token; spaces -> U+2581; one symbol per UTF-8 character; merge
the adjacent pair whose concatenation is a vocab entry with the HIGHEST score
(ties: smaller left index), skipping stale pairs, until none is left; final
symbols not in the vocab become <0xXX> byte tokens.
Invariants: encode() is exact; encode_fast() gives identical ids whenever no
vocab piece holds U+2581 after its first character (checked at load), and is
what the corpus tokenizer uses (memoized per "▁word").
Checked against shared/testdata/vocab/ggml-vocab-llama-spm.gguf.{inp,out} by check_tools.py.
Non-goals: UGM/BPE tokenizers, parse_special = true.
"""
import heapq
import json

SPACE = '\u2581'
TYPE_NORMAL, TYPE_UNKNOWN, TYPE_CONTROL, TYPE_USER, TYPE_UNUSED, TYPE_BYTE = 1, 2, 3, 4, 5, 6
_UTF8_LEN = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4]


class Vocab:
    def __init__(self, tokens, scores, types, bos=1, eos=2, unk=0,
                 add_bos=True, add_eos=False, add_space_prefix=True):
        self.tokens = list(tokens)
        self.scores = [float(s) for s in scores]
        self.types = [int(t) for t in types]
        self.bos, self.eos, self.unk = bos, eos, unk
        self.add_bos, self.add_eos, self.add_space_prefix = add_bos, add_eos, add_space_prefix
        self.by_bytes = {}
        for i, t in enumerate(self.tokens):
            self.by_bytes.setdefault(t.encode('utf-8', errors='surrogateescape'), i)
        self.byte_ids = []
        for b in range(256):
            i = self.by_bytes.get(('<0x%02X>' % b).encode())
            if i is None:
                i = self.by_bytes.get(bytes([b]))
            self.byte_ids.append(i)
        self.user_defined = sorted((t for i, t in enumerate(self.tokens) if self.types[i] == TYPE_USER),
                                   key=lambda t: -len(t.encode('utf-8', errors='surrogateescape')))
        self.fast_ok = not self.user_defined and all(
            SPACE not in t[1:] for i, t in enumerate(self.tokens) if self.types[i] in (TYPE_NORMAL, TYPE_UNUSED))
        self._memo = {}

    # ---- persistence ----
    @classmethod
    def load_json(cls, path):
        with open(path, encoding='utf-8') as f:
            d = json.load(f)
        return cls(d['tokens'], d['scores'], d['types'], d['bos'], d['eos'], d['unk'])

    def save_json(self, path):
        d = dict(tokens=self.tokens, scores=self.scores, types=self.types,
                 bos=self.bos, eos=self.eos, unk=self.unk)
        with open(path, 'w', encoding='utf-8') as f:
            json.dump(d, f, ensure_ascii=False, indent=0)

    @classmethod
    def from_gguf(cls, reader):
        kv = reader.kv
        return cls(kv['tokenizer.ggml.tokens'], list(kv['tokenizer.ggml.scores']),
                   list(kv['tokenizer.ggml.token_type']),
                   kv.get('tokenizer.ggml.bos_token_id', 1), kv.get('tokenizer.ggml.eos_token_id', 2),
                   kv.get('tokenizer.ggml.unknown_token_id', 0),
                   bool(kv.get('tokenizer.ggml.add_bos_token', True)),
                   bool(kv.get('tokenizer.ggml.add_eos_token', False)),
                   bool(kv.get('tokenizer.ggml.add_space_prefix', True)))

    # ---- SPM core (one raw fragment, already escaped) ----
    def _spm(self, text, out):
        b = text.encode('utf-8', errors='surrogateescape')
        if not b:
            return
        starts, lens = [], []
        o = 0
        while o < len(b):
            n = min(_UTF8_LEN[b[o] >> 4], len(b) - o)
            starts.append(o)
            lens.append(n)
            o += n
        n_sym = len(starts)
        prev = list(range(-1, n_sym - 1))
        nxt = list(range(1, n_sym + 1))
        nxt[-1] = -1
        heap = []
        rev = {}
        vocab = self.by_bytes
        scores = self.scores
        n_tok = len(self.tokens)

        def add(left, right):
            if left == -1 or right == -1:
                return
            s = b[starts[left]:starts[left] + lens[left] + lens[right]]
            tok = vocab.get(s)
            if tok is None or tok >= n_tok:
                return
            heapq.heappush(heap, (-scores[tok], left, right, len(s)))
            rev[s] = (left, right)

        for i in range(1, n_sym):
            add(i - 1, i)
        while heap:
            _, left, right, size = heapq.heappop(heap)
            if lens[left] == 0 or lens[right] == 0 or lens[left] + lens[right] != size:
                continue
            lens[left] += lens[right]
            lens[right] = 0
            nxt[left] = nxt[right]
            if nxt[right] >= 0:
                prev[nxt[right]] = left
            add(prev[left], left)
            add(left, nxt[left])

        def reseg(i):
            s = b[starts[i]:starts[i] + lens[i]]
            tok = vocab.get(s)
            if tok is not None:
                out.append(tok)
                return
            p = rev.get(s)
            if p is None:
                for c in s:
                    out.append(self.byte_ids[c])
                return
            reseg(p[0])
            reseg(p[1])

        i = 0
        while i != -1:
            reseg(i)
            i = nxt[i]

    def _fragments(self, text):
        """Split on USER_DEFINED tokens (longest first). -> list of str | int."""
        frags = [text]
        for t in self.user_defined:
            tid = self.by_bytes[t.encode('utf-8', errors='surrogateescape')]
            nf = []
            for f in frags:
                if not isinstance(f, str):
                    nf.append(f)
                    continue
                parts = f.split(t)
                for k, p in enumerate(parts):
                    if k:
                        nf.append(tid)
                    if p:
                        nf.append(p)
            frags = nf
        return frags

    def encode(self, text, add_special=True, fast=False):
        out = []
        if add_special and self.add_bos:
            out.append(self.bos)
        prev_special = True
        for f in self._fragments(text) if text else []:
            if isinstance(f, int):
                out.append(f)
                prev_special = True
                continue
            s = (' ' if self.add_space_prefix and prev_special else '') + f
            s = s.replace(' ', SPACE)
            if fast and self.fast_ok:
                self._spm_words(s, out)
            else:
                self._spm(s, out)
            prev_special = False
        if add_special and self.add_eos:
            out.append(self.eos)
        return out

    def _spm_words(self, s, out):
        # no piece holds "▁" after its first character, so no merge crosses a "▁" boundary
        start = 0
        n = len(s)
        while start < n:
            end = s.find(SPACE, start + 1)
            if end < 0:
                end = n
            w = s[start:end]
            ids = self._memo.get(w)
            if ids is None:
                ids = []
                self._spm(w, ids)
                self._memo[w] = ids
            out.extend(ids)
            start = end

    def encode_fast(self, text, add_special=True):
        return self.encode(text, add_special, fast=True)

    def decode(self, ids):
        bs = bytearray()
        for i in ids:
            t = self.types[i]
            if t == TYPE_BYTE:
                bs.append(int(self.tokens[i][3:5], 16))
            elif t in (TYPE_NORMAL, TYPE_USER):
                bs += self.tokens[i].replace(SPACE, ' ').encode('utf-8', errors='surrogateescape')
        s = bs.decode('utf-8', errors='replace')
        if self.add_space_prefix and s.startswith(' '):
            s = s[1:]
        return s
