#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""Tokenize train.txt / valid.txt / heldout.txt with spm.py into uint16 token-id files.

Development tool for the embedded model (issue 7). Each file is tokenized as ONE text,
exactly as a llama.cpp-compatible runtime tokenizes a prompt or a perplexity file:
add_space_prefix on the whole text (lines = chapters, "\n" becomes byte token <0x0A>),
no BOS here (the trainer puts BOS at the start of every training window, as
llama.cpp's perplexity puts it at the start of every chunk).
Check: the memoized fast path must equal the reference encoder on the first chapters.
Usage: tokenize_corpus.py DATADIR   (reads tokenizer.json, {train,valid,heldout}.txt;
writes {train,valid,heldout}.bin: little-endian uint16)
"""
import os
import sys

import numpy as np

import spm


def main():
    d = sys.argv[1]
    v = spm.Vocab.load_json(os.path.join(d, 'tokenizer.json'))
    if len(v.tokens) > 65535:
        sys.exit('tokenize_corpus: vocab does not fit uint16')
    for name in ('train', 'valid', 'heldout'):
        with open(os.path.join(d, name + '.txt'), encoding='utf-8') as f:
            text = f.read()
        sample = text[:20000]
        if v.encode(sample, add_special=False) != v.encode_fast(sample, add_special=False):
            sys.exit('tokenize_corpus: fast path disagrees with the reference encoder')
        ids = v.encode_fast(text, add_special=False)
        if v.decode(ids) != text:
            sys.exit(f'tokenize_corpus: {name} does not round-trip')
        np.asarray(ids, dtype='<u2').tofile(os.path.join(d, name + '.bin'))
        print(f'{name}: {len(text)} chars -> {len(ids)} tokens ({len(text) / len(ids):.2f} chars/token)')


if __name__ == '__main__':
    main()
