#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""Checks for the embedded-model tools (issue 7), against data we did not make.

1. spm.py vs llama.cpp's tokenizer vectors (shared/testdata/vocab/ggml-vocab-llama-spm.*).
2. gguf.quantize_q8_0 / dequantize vs shared/testdata/quant/q8_0.qv (byte/bit exact).
3. llama_ref.py vs llama.cpp's logits on shared/testdata/models/test-llama-f32.{gguf,ref}.
4. With --model F32.gguf [--q8 Q8.gguf] --ref ORACLE.ref: llama_ref on our exported files
   vs the PyTorch oracle (NMSE), and the tokenizer metadata round trip.
Usage: check_tools.py [--testdata DIR] [--model F32.gguf --ref X.ref [--q8 Q8.gguf]]
Exit status 1 on any failure.
"""
import argparse
import os
import struct
import sys

import numpy as np

import gguf
import llama_ref
import spm

FAIL = []


def check(ok, what):
    print(('ok   ' if ok else 'FAIL ') + what)
    if not ok:
        FAIL.append(what)


def check_spm(td):
    base = os.path.join(td, 'vocab', 'ggml-vocab-llama-spm.gguf')
    v = spm.Vocab.from_gguf(gguf.Reader(base))
    with open(base + '.inp', encoding='utf-8') as f:
        inp = f.read().split('\n__ggml_vocab_test__\n')
    if inp and inp[-1] == '':
        inp = inp[:-1]
    with open(base + '.out') as f:
        out = f.read().split('\n')
    good = sum(v.encode(t, add_special=False) == [int(x) for x in out[i].split()] for i, t in enumerate(inp))
    check(good == len(inp), f'spm.py on llama-spm vectors: {good}/{len(inp)}')


def check_q8(td):
    with open(os.path.join(td, 'quant', 'q8_0.qv'), 'rb') as f:
        b = f.read()
    _, nr, npr, rb = struct.unpack('<4I', b[8:24])
    o = 24
    x = np.frombuffer(b, '<f4', nr * npr, o)
    o += nr * npr * 4
    q = b[o:o + nr * rb]
    o += nr * rb
    dq = np.frombuffer(b, '<f4', nr * npr, o)
    check(gguf.quantize_q8_0(x) == q, 'Q8_0 quantizer byte-exact vs q8_0.qv')
    check(np.array_equal(gguf.dequantize_q8_0(q, nr * npr).view(np.uint32), dq.view(np.uint32)),
          'Q8_0 dequantizer bit-exact vs q8_0.qv')


def check_ref(td):
    m = llama_ref.Model(os.path.join(td, 'models', 'test-llama-f32.gguf'))
    _, _, toks, ref = llama_ref.read_ref(os.path.join(td, 'models', 'test-llama-f32.ref'))
    e = llama_ref.nmse(m.forward(toks), ref)
    check(e < 1e-9, f'llama_ref vs llama.cpp logits (test-llama-f32): nmse {e:.3e}')


def check_model(f32, q8, ref):
    _, _, toks, oracle = llama_ref.read_ref(ref)
    m = llama_ref.Model(f32)
    e = llama_ref.nmse(m.forward(toks), oracle)
    check(e < 1e-9, f'{os.path.basename(f32)}: llama_ref vs PyTorch oracle nmse {e:.3e}')
    v = spm.Vocab.from_gguf(m.reader)
    txt = 'In the beginning God created the heaven and the earth.'
    check(v.decode(v.encode(txt)) == txt, 'tokenizer metadata round trip')
    if q8:
        mq = llama_ref.Model(q8)
        lq = mq.forward(toks)
        e = llama_ref.nmse(lq, oracle)
        agree = float(np.mean(lq.argmax(1) == oracle.argmax(1)))
        check(e < 1e-3, f'{os.path.basename(q8)}: llama_ref (f32 activations) vs oracle nmse {e:.3e}, '
                        f'argmax agreement {agree:.3f}')
        rq = gguf.Reader(q8)
        types = {n: rq.tensor_type(n) for n in rq.tensors}
        check(all((t == gguf.GGML_Q8_0) == (len(rq.tensors[n][0]) == 2) for n, t in types.items()),
              'Q8_0 file: 2-D tensors Q8_0, 1-D tensors F32')


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument('--testdata', default=os.environ.get('SB_TESTDATA',
                                                         os.path.join(here, '..', '..', '..', 'shared', 'testdata')))
    ap.add_argument('--model')
    ap.add_argument('--q8')
    ap.add_argument('--ref')
    a = ap.parse_args()
    if os.path.isdir(a.testdata):
        check_spm(a.testdata)
        check_q8(a.testdata)
        check_ref(a.testdata)
    else:
        print(f'skip: no test data at {a.testdata}')
    if a.model:
        check_model(a.model, a.q8, a.ref)
    print(f'{len(FAIL)} failed')
    sys.exit(1 if FAIL else 0)


if __name__ == '__main__':
    main()
