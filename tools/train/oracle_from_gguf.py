#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""PyTorch (float64, CPU) logits of a GGUF llama model for the tokens of an existing SBREF1 file.

Development tool for the embedded model (issue 7). Loads any F32/F16/Q8_0 GGUF written by
export_gguf.py into model.py's Llama (weights dequantized to float, no Q/K permutation)
and evaluates the token sequence of REF_IN (prompt and decode tokens alike, as one causal
pass: row i is the output after token i). Uses:
  * on the F32 file it must reproduce train.py's oracle (checks the GGUF -> PyTorch path);
  * on the Q8_0 file it gives the oracle of the dequantized weights, i.e. what a runtime
    computes apart from its own activation rounding (tests/data/embedded-oracle-q8_0.ref).
The decode tokens are kept from REF_IN; the tool reports whether each is still the argmax
of the previous row (it must be, for the SBREF1 contract).
Usage: oracle_from_gguf.py MODEL.gguf REF_IN REF_OUT
"""
import sys

import numpy as np
import torch

import gguf
import llama_ref
from export_gguf import cfg_from_kv
from model import Config, Llama


def load(path):
    r = gguf.Reader(path)
    c = cfg_from_kv(r.kv)
    hd = c.pop('head_dim')
    m = Llama(Config(**c))
    if m.cfg.head_dim != hd:
        raise SystemExit('oracle_from_gguf: rope.dimension_count != head_dim')
    sd = {n: torch.from_numpy(r.tensor(n).copy()) for n in r.tensors}
    m.load_state_dict(sd, strict=True)
    return m


def main():
    src, ref_in, ref_out = sys.argv[1:4]
    n_prompt, n_decode, toks, old = llama_ref.read_ref(ref_in)
    m = load(src).double().eval()
    with torch.no_grad():
        lg = m(torch.tensor([toks.tolist()]), fast=False)[0].numpy()
    ok = all(int(np.argmax(lg[i - 1])) == int(toks[i]) for i in range(n_prompt, n_prompt + n_decode))
    print(f'nmse vs {ref_in}: {llama_ref.nmse(lg, old):.3e}; decode tokens are argmax of previous rows: {ok}')
    if not ok:
        raise SystemExit('oracle_from_gguf: decode tokens are not this model\'s argmax; not writing')
    llama_ref.write_ref(ref_out, toks, lg, n_prompt, n_decode)


if __name__ == '__main__':
    main()
