#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""Extract the King James Version from Debian's `bible-kjv` package as plain text.

Development tool for the embedded model (issue 7); the runtime never runs Python.
Input: the output of `bible -f Gen1:1-Rev22:21` (package bible-kjv, data in
bible-kjv-text), one verse per line, "Ge1:1 In the beginning ...". Output: one
chapter per line, its verses joined by single spaces, references dropped
(plain prose, so every word inside a line carries SentencePiece's "▁" prefix).
Split: whole books from the end of the canon are held out until >= 5% of the
characters (Colossians .. Revelation: heldout.txt, only for the final perplexity);
the books just before them, until >= 1% (Galatians .. Philippians: valid.txt), are for
choosing the checkpoint; everything before is training text.
Invariants: pure ASCII text (checked), deterministic output for a given package.
Non-goals: verse/chapter headings, any normalization beyond dropping references.

Usage: prepare_corpus.py OUTDIR [--raw FILE]   -> OUTDIR/{train,valid,heldout}.txt
"""
import argparse
import os
import re
import subprocess
import sys

HOLDOUT_FRACTION = 0.05
VALID_FRACTION = 0.01
VERSE_RE = re.compile(r'^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$')


def read_raw(path):
    if path:
        with open(path, encoding='ascii') as f:
            return f.read()
    out = subprocess.run(['bible', '-f', 'Gen1:1-Rev22:21'], stdin=subprocess.DEVNULL,
                         capture_output=True, check=True)
    return out.stdout.decode('ascii')


def parse(raw):
    """-> list of (book, [chapter_text, ...]) in canon order."""
    books = []
    cur_book, cur_chap, verses = None, None, []
    for n, line in enumerate(raw.splitlines(), 1):
        m = VERSE_RE.match(line)
        if not m:
            sys.exit(f'prepare_corpus: line {n} is not a verse: {line[:60]!r}')
        book, chap, text = m.group(1), int(m.group(2)), m.group(4).strip()
        if book != cur_book or chap != cur_chap:
            if verses:
                books[-1][1].append(' '.join(verses))
            verses = []
            if book != cur_book:
                books.append((book, []))
            cur_book, cur_chap = book, chap
        verses.append(' '.join(text.split()))
    if verses:
        books[-1][1].append(' '.join(verses))
    return books


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('outdir')
    ap.add_argument('--raw', help='saved output of `bible -f Gen1:1-Rev22:21` (default: run it)')
    a = ap.parse_args()
    books = parse(read_raw(a.raw))
    if len(books) != 66:
        sys.exit(f'prepare_corpus: expected 66 books, got {len(books)}')
    sizes = [sum(len(c) + 1 for c in chs) for _, chs in books]
    total = sum(sizes)
    acc, split = 0, len(books)
    while acc < HOLDOUT_FRACTION * total:
        split -= 1
        acc += sizes[split]
    vacc, vsplit = 0, split
    while vacc < VALID_FRACTION * total:
        vsplit -= 1
        vacc += sizes[vsplit]
    os.makedirs(a.outdir, exist_ok=True)
    for name, part in (('train.txt', books[:vsplit]), ('valid.txt', books[vsplit:split]),
                       ('heldout.txt', books[split:])):
        with open(os.path.join(a.outdir, name), 'w', encoding='ascii', newline='\n') as f:
            for _, chs in part:
                for c in chs:
                    f.write(c + '\n')
    n_ch = sum(len(c) for _, c in books)
    print(f'{len(books)} books, {n_ch} chapters, {total} chars; held out {books[split][0]}..'
          f'{books[-1][0]} ({len(books) - split} books, {acc} chars, {100.0 * acc / total:.2f}%); valid '
          f'{books[vsplit][0]}..{books[split - 1][0]} ({vacc} chars, {100.0 * vacc / total:.2f}%)')


if __name__ == '__main__':
    main()
