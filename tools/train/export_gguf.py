#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""Write the embedded model as GGUF v3 ("llama" architecture, "llama" SPM tokenizer).

Development tool for the embedded model (issue 7). write_model() is called by train.py
on the device to write the F32 file; the CLI re-exports an F32 GGUF as Q8_0 here:
  export_gguf.py IN_F32.gguf OUT.gguf --type q8_0
Tensors (architectures.md §4.2, ne[0] = input dim, PyTorch (out, in) order as is):
token_embd [E,V], blk.N.{attn_norm [E], attn_q [E,E], attn_k/attn_v [E,Hkv], attn_output
[E,E], ffn_norm [E], ffn_gate/ffn_up [E,F], ffn_down [F,E]}, output_norm [E], output [E,V].
Q/K rows are NOT permuted: model.py trains in llama.cpp's adjacent-pair RoPE convention.
Q8_0 file: every 2-D tensor (token_embd and output too) is Q8_0 (formats.md §2.5, as
llama-quantize's Q8_0 mix); 1-D norm weights stay F32; general.file_type = 7 and
general.quantization_version = 2. F32 file: general.file_type = 0.
Tokenizer keys (§8.1): model "llama", tokens/scores/token_type, bos 1, eos 2, unk 0,
add_bos_token true, add_eos_token false, add_space_prefix true. No chat template.
"""
import argparse

import gguf
import spm

FTYPE = {'f32': 0, 'q8_0': 7}


def write_model(path, cfg, tensors, vocab, ftype, name):
    """cfg: dict with n_vocab n_embd n_layer n_head n_head_kv n_ff n_ctx rope_base eps head_dim."""
    w = gguf.Writer()
    w.add('general.architecture', gguf.T_STR, 'llama')
    w.add('general.name', gguf.T_STR, name)
    w.add('llama.context_length', gguf.T_U32, cfg['n_ctx'])
    w.add('llama.embedding_length', gguf.T_U32, cfg['n_embd'])
    w.add('llama.block_count', gguf.T_U32, cfg['n_layer'])
    w.add('llama.feed_forward_length', gguf.T_U32, cfg['n_ff'])
    w.add('llama.attention.head_count', gguf.T_U32, cfg['n_head'])
    w.add('llama.attention.head_count_kv', gguf.T_U32, cfg['n_head_kv'])
    w.add('llama.rope.freq_base', gguf.T_F32, float(cfg['rope_base']))
    w.add('llama.attention.layer_norm_rms_epsilon', gguf.T_F32, float(cfg['eps']))
    w.add('llama.rope.dimension_count', gguf.T_U32, cfg['head_dim'])
    w.add('llama.vocab_size', gguf.T_U32, cfg['n_vocab'])
    w.add('general.file_type', gguf.T_U32, FTYPE[ftype])
    w.add('tokenizer.ggml.model', gguf.T_STR, 'llama')
    w.add_array('tokenizer.ggml.tokens', gguf.T_STR, vocab.tokens)
    w.add_array('tokenizer.ggml.scores', gguf.T_F32, vocab.scores)
    w.add_array('tokenizer.ggml.token_type', gguf.T_I32, vocab.types)
    w.add('tokenizer.ggml.bos_token_id', gguf.T_U32, vocab.bos)
    w.add('tokenizer.ggml.eos_token_id', gguf.T_U32, vocab.eos)
    w.add('tokenizer.ggml.unknown_token_id', gguf.T_U32, vocab.unk)
    w.add('tokenizer.ggml.add_bos_token', gguf.T_BOOL, True)
    w.add('tokenizer.ggml.add_eos_token', gguf.T_BOOL, False)
    w.add('tokenizer.ggml.add_space_prefix', gguf.T_BOOL, True)
    if ftype != 'f32':
        w.add('general.quantization_version', gguf.T_U32, 2)
    if len(vocab.tokens) != cfg['n_vocab']:
        raise ValueError(f'vocab has {len(vocab.tokens)} tokens, model {cfg["n_vocab"]}')
    for tname, arr in tensors:
        if arr.ndim >= 2 and ftype == 'q8_0':
            w.add_tensor(tname, arr, gguf.GGML_Q8_0)
        else:
            w.add_tensor(tname, arr, gguf.GGML_F32)
    return w.write(path)


def cfg_from_kv(kv):
    E, H = kv['llama.embedding_length'], kv['llama.attention.head_count']
    return dict(n_vocab=len(kv['tokenizer.ggml.tokens']), n_embd=E, n_layer=kv['llama.block_count'],
                n_head=H, n_head_kv=kv['llama.attention.head_count_kv'], n_ff=kv['llama.feed_forward_length'],
                n_ctx=kv['llama.context_length'], rope_base=kv['llama.rope.freq_base'],
                eps=kv['llama.attention.layer_norm_rms_epsilon'], head_dim=kv['llama.rope.dimension_count'])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('src', help='F32 GGUF written by train.py')
    ap.add_argument('dst')
    ap.add_argument('--type', choices=sorted(FTYPE), default='q8_0')
    a = ap.parse_args()
    r = gguf.Reader(a.src)
    if r.kv.get('general.file_type') != 0:
        raise SystemExit('export_gguf: source must be an F32 GGUF')
    tensors = [(n, r.tensor(n)) for n in r.tensors]
    n = write_model(a.dst, cfg_from_kv(r.kv), tensors, spm.Vocab.from_gguf(r), a.type, r.kv['general.name'])
    print(f'{a.dst}: {n} bytes')


if __name__ == '__main__':
    main()
