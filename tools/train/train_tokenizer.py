#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""Train a small SentencePiece-style BPE vocabulary for the embedded model (issue 7).

Development tool; pure Python (no sentencepiece). Text is escaped the way the runtime
sees it (leading space per document, " " -> U+2581), pre-split into pieces
"▁?letters+" / "▁?one other char" / "▁", and BPE merges are learned on piece
frequencies (most frequent pair first; ties broken by the pair's text).
Vocabulary layout (GGUF model "llama"):
  0 <unk> (type 2), 1 <s> BOS (type 3), 2 </s> EOS (type 3),
  3..258 <0x00>..<0xFF> (type 6, score 0),
  then merged pieces in merge order, score = -rank (rank 0 = first merge),
  then the single characters of the corpus, score = -(n_merges + i).
llama.cpp's SPM encoder merges the adjacent pair whose concatenation has the highest
score, so with score = -rank it follows the learned merge order (it may also take a
piece via a different split, which only makes pieces longer). The corpus is tokenized
with spm.py, i.e. with exactly that encoder, so train and run time agree.
Invariant: no normal piece holds U+2581 after its first character (spm.fast_ok).
Usage: train_tokenizer.py TRAIN_TXT OUT_JSON [--vocab 4096]
"""
import argparse
import collections
import re
import sys

import spm

PIECE_RE = re.compile('\u2581?[A-Za-z]+|\u2581?[^A-Za-z\u2581]|\u2581')


def pieces_of(text):
    """Documents are lines; the runtime adds one leading space to the whole text only."""
    counts = collections.Counter()
    esc = (' ' + text).replace(' ', spm.SPACE)
    for line in esc.split('\n'):
        counts.update(PIECE_RE.findall(line))
    return counts


def train(counts, n_merges):
    words = [list(w) for w in counts]
    freqs = list(counts.values())
    pair_count = collections.Counter()
    where = collections.defaultdict(set)
    for wi, syms in enumerate(words):
        for a, b in zip(syms, syms[1:]):
            pair_count[(a, b)] += freqs[wi]
            where[(a, b)].add(wi)
    merges = []
    while len(merges) < n_merges and pair_count:
        best = max(pair_count.items(), key=lambda kv: (kv[1], kv[0]))
        (a, b), c = best
        if c < 2:
            break
        merges.append(a + b)
        for wi in list(where[(a, b)]):
            syms = words[wi]
            f = freqs[wi]
            for p in zip(syms, syms[1:]):
                pair_count[p] -= f
                if pair_count[p] <= 0:
                    del pair_count[p]
                where[p].discard(wi)
            new = []
            i = 0
            while i < len(syms):
                if i + 1 < len(syms) and syms[i] == a and syms[i + 1] == b:
                    new.append(a + b)
                    i += 2
                else:
                    new.append(syms[i])
                    i += 1
            words[wi] = new
            for p in zip(new, new[1:]):
                pair_count[p] += f
                where[p].add(wi)
        where.pop((a, b), None)
    return merges


def build_vocab(counts, vocab_size):
    chars = sorted({ch for w in counts for ch in w})
    n_fixed = 3 + 256
    n_merges = vocab_size - n_fixed - len(chars)
    merges = train(counts, n_merges)
    seen = set()
    pieces = []
    for m in merges:             # a piece can only be learned once: a merged pair disappears
        if m in seen:
            sys.exit(f'train_tokenizer: duplicate piece {m!r}')
        seen.add(m)
        pieces.append(m)
    tokens = ['<unk>', '<s>', '</s>'] + ['<0x%02X>' % b for b in range(256)]
    types = [spm.TYPE_UNKNOWN, spm.TYPE_CONTROL, spm.TYPE_CONTROL] + [spm.TYPE_BYTE] * 256
    scores = [0.0] * n_fixed
    for r, p in enumerate(pieces):
        tokens.append(p)
        types.append(spm.TYPE_NORMAL)
        scores.append(float(-r))
    for i, ch in enumerate(chars):
        tokens.append(ch)
        types.append(spm.TYPE_NORMAL)
        scores.append(float(-(len(pieces) + i)))
    return spm.Vocab(tokens, scores, types, bos=1, eos=2, unk=0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('train_txt')
    ap.add_argument('out_json')
    ap.add_argument('--vocab', type=int, default=4096)
    a = ap.parse_args()
    with open(a.train_txt, encoding='utf-8') as f:
        text = f.read()
    counts = pieces_of(text)
    v = build_vocab(counts, a.vocab)
    if not v.fast_ok:
        sys.exit('train_tokenizer: a piece holds U+2581 after its first character')
    v.save_json(a.out_json)
    print(f'vocab {len(v.tokens)} ({len(counts)} distinct pre-split pieces)')


if __name__ == '__main__':
    main()
