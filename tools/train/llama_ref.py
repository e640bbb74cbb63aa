# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""Plain numpy forward pass of a GGUF "llama" model, written from architectures.md §4.4.

Development tool for the embedded model (issue 7). It is independent of model.py (the
PyTorch training model), so the chain "llama.cpp logits == this == PyTorch oracle"
checks both the exporter and the training model's llama.cpp conventions:
RMSNorm in fp64-accumulated fp32, RoPE NORM mode on adjacent pairs (2i, 2i+1) with
theta_i = p * base^(-2i/n_rot) / rope_freqs_i, GQA head h -> kv head h // (n_head/n_head_kv),
scale 1/sqrt(head_dim), causal softmax, SwiGLU on the gate, untied or tied output.
Weights are dequantized to fp32 (so a Q8_0 file is evaluated with fp32 activations,
not llama.cpp's q8_0 activations). Non-goals: speed, KV cache, other architectures.
Also reads/writes SBREF1 reference-logit files (shared/testdata/README.md).
"""
import struct

import numpy as np

import gguf


def read_ref(path):
    with open(path, 'rb') as f:
        b = f.read()
    if b[:8] != b'SBREF1\0\0':
        raise ValueError(f'{path}: bad magic')
    n_vocab, n_prompt, n_decode, _ = struct.unpack('<4I', b[8:24])
    n = n_prompt + n_decode
    toks = np.frombuffer(b, '<i4', n, 24).copy()
    logits = np.frombuffer(b, '<f4', n * n_vocab, 24 + 4 * n).reshape(n, n_vocab).copy()
    return n_prompt, n_decode, toks, logits


def write_ref(path, tokens, logits, n_prompt, n_decode):
    tokens = np.asarray(tokens, dtype='<i4')
    logits = np.ascontiguousarray(logits, dtype='<f4')
    assert logits.shape[0] == len(tokens) == n_prompt + n_decode
    with open(path, 'wb') as f:
        f.write(b'SBREF1\0\0' + struct.pack('<4I', logits.shape[1], n_prompt, n_decode, 0))
        f.write(tokens.tobytes())
        f.write(logits.tobytes())


def nmse(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(np.sum((a - b) ** 2) / np.sum(b ** 2))


def rmsnorm(x, w, eps):
    ms = np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True)
    return (x / np.sqrt(ms + eps)).astype(np.float32) * w


def rope_norm(x, pos, base, ff):
    """x: [T, H, d] with d = n_rot; pairs (2i, 2i+1)."""
    d = x.shape[-1]
    i = np.arange(d // 2, dtype=np.float64)
    theta = pos[:, None].astype(np.float64) * base ** (-2.0 * i / d) / ff[None, :]
    c = np.cos(theta)[:, None, :]
    s = np.sin(theta)[:, None, :]
    a = x[..., 0::2].astype(np.float64)
    b = x[..., 1::2].astype(np.float64)
    out = np.empty_like(x)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = a * s + b * c
    return out


class Model:
    def __init__(self, path):
        r = gguf.Reader(path)
        kv = r.kv
        if kv['general.architecture'] != 'llama':
            raise ValueError('not a llama model')
        self.n_layer = kv['llama.block_count']
        self.n_embd = kv['llama.embedding_length']
        self.n_head = kv['llama.attention.head_count']
        self.n_kv = kv.get('llama.attention.head_count_kv', self.n_head)
        self.eps = kv['llama.attention.layer_norm_rms_epsilon']
        self.base = kv.get('llama.rope.freq_base', 10000.0)
        self.hd = self.n_embd // self.n_head
        self.t = {n: r.tensor(n) for n in r.tensors}
        self.kv = kv
        self.reader = r

    def forward(self, tokens):
        """tokens: ints at positions 0..T-1 -> logits [T, n_vocab] (fp32)."""
        t = self.t
        T = len(tokens)
        pos = np.arange(T)
        ff = t.get('rope_freqs.weight', np.ones(self.hd // 2, np.float32)).astype(np.float64)
        x = t['token_embd.weight'][np.asarray(tokens)].astype(np.float32)
        mask = np.triu(np.full((T, T), -np.inf, np.float32), 1)
        rep = self.n_head // self.n_kv
        for il in range(self.n_layer):
            p = f'blk.{il}.'
            h = rmsnorm(x, t[p + 'attn_norm.weight'], self.eps)
            q = (h @ t[p + 'attn_q.weight'].T).reshape(T, self.n_head, self.hd)
            k = (h @ t[p + 'attn_k.weight'].T).reshape(T, self.n_kv, self.hd)
            v = (h @ t[p + 'attn_v.weight'].T).reshape(T, self.n_kv, self.hd)
            q = rope_norm(q, pos, self.base, ff)
            k = rope_norm(k, pos, self.base, ff)
            o = np.empty((T, self.n_head, self.hd), np.float32)
            for hh in range(self.n_head):
                kh = hh // rep
                s = (q[:, hh, :] @ k[:, kh, :].T) / np.float32(np.sqrt(self.hd)) + mask
                s = s - s.max(axis=1, keepdims=True)
                e = np.exp(s.astype(np.float64))
                pr = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
                o[:, hh, :] = pr @ v[:, kh, :]
            x = x + o.reshape(T, -1) @ t[p + 'attn_output.weight'].T
            h = rmsnorm(x, t[p + 'ffn_norm.weight'], self.eps)
            g = h @ t[p + 'ffn_gate.weight'].T
            u = h @ t[p + 'ffn_up.weight'].T
            act = (g / (1.0 + np.exp(-g.astype(np.float64)))).astype(np.float32) * u
            x = x + act @ t[p + 'ffn_down.weight'].T
        h = rmsnorm(x, t['output_norm.weight'], self.eps)
        w_out = t.get('output.weight', t['token_embd.weight'])
        return (h @ w_out.T).astype(np.float32)
