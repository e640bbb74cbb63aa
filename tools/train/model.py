# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""Llama-architecture decoder in plain PyTorch, in llama.cpp's (GGUF) conventions.

Development tool for the embedded model (issue 7). The math is architectures.md §4.4
exactly, so the trained weights export to GGUF "llama" WITHOUT any transform:
  x = token_embd[tok]; per layer: h = RMSNorm(x)*attn_norm; q,k,v = Wq h, Wk h, Wv h;
  RoPE NORM mode: within each head rotate ADJACENT pairs (2i, 2i+1) by
  theta_i = p * base^(-2i/head_dim)  (this is the GGUF/llama.cpp convention, i.e. the
  layout after the HF->GGUF Q/K row permutation of §4.3: we train directly in it, so the
  exporter must NOT permute Q/K rows);
  GQA: query head h reads kv head h // (n_head/n_head_kv); scale 1/sqrt(head_dim); causal;
  x += Wo concat(heads); h = RMSNorm(x)*ffn_norm; x += W_down(silu(W_gate h) * (W_up h));
  logits = W_out RMSNorm(x)*output_norm  (untied output).
nn.Linear weights are (out, in) = GGUF [n_in, n_out] memory layout (no transpose).
No biases. Dropout (training only) on attention probabilities and both residual branches.
Non-goals: KV cache, sampling efficiency; the fast path uses SDPA when present (torch >= 2).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Config:
    def __init__(self, n_vocab=4096, n_embd=384, n_layer=6, n_head=6, n_head_kv=2, n_ff=1024,
                 n_ctx=512, rope_base=10000.0, eps=1e-5, dropout=0.0):
        self.n_vocab, self.n_embd, self.n_layer = n_vocab, n_embd, n_layer
        self.n_head, self.n_head_kv, self.n_ff, self.n_ctx = n_head, n_head_kv, n_ff, n_ctx
        self.rope_base, self.eps, self.dropout = rope_base, eps, dropout
        assert n_embd % n_head == 0 and n_head % n_head_kv == 0
        self.head_dim = n_embd // n_head

    def to_dict(self):
        return dict(self.__dict__)


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        xf = x.float() if x.dtype != torch.float64 else x
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return y * self.weight.to(y.dtype)


def rope_tables(cfg, T, device, dtype):
    """cos/sin [T, head_dim/2] for theta_i = p * base^(-2i/head_dim), computed in float64."""
    i = torch.arange(cfg.head_dim // 2, dtype=torch.float64, device=device)
    inv = cfg.rope_base ** (-2.0 * i / cfg.head_dim)
    theta = torch.arange(T, dtype=torch.float64, device=device)[:, None] * inv[None, :]
    return theta.cos().to(dtype), theta.sin().to(dtype)


def apply_rope(x, cos, sin):
    """x [B, T, H, d]: rotate pairs (2i, 2i+1) (NORM mode)."""
    B, T, H, d = x.shape
    xf = x.to(cos.dtype).reshape(B, T, H, d // 2, 2)
    a, b = xf[..., 0], xf[..., 1]
    c = cos[None, :T, None, :]
    s = sin[None, :T, None, :]
    return torch.stack((a * c - b * s, a * s + b * c), dim=-1).reshape(B, T, H, d)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        E, hd = cfg.n_embd, cfg.head_dim
        self.cfg = cfg
        self.attn_norm = RMSNorm(E, cfg.eps)
        self.attn_q = nn.Linear(E, cfg.n_head * hd, bias=False)
        self.attn_k = nn.Linear(E, cfg.n_head_kv * hd, bias=False)
        self.attn_v = nn.Linear(E, cfg.n_head_kv * hd, bias=False)
        self.attn_output = nn.Linear(cfg.n_head * hd, E, bias=False)
        self.ffn_norm = RMSNorm(E, cfg.eps)
        self.ffn_gate = nn.Linear(E, cfg.n_ff, bias=False)
        self.ffn_up = nn.Linear(E, cfg.n_ff, bias=False)
        self.ffn_down = nn.Linear(cfg.n_ff, E, bias=False)

    def forward(self, x, cos, sin, fast):
        cfg = self.cfg
        B, T, _ = x.shape
        hd, H, KV = cfg.head_dim, cfg.n_head, cfg.n_head_kv
        h = self.attn_norm(x)
        q = self.attn_q(h).view(B, T, H, hd)
        k = self.attn_k(h).view(B, T, KV, hd)
        v = self.attn_v(h).view(B, T, KV, hd)
        q = apply_rope(q, cos, sin).to(v.dtype).transpose(1, 2)
        k = apply_rope(k, cos, sin).to(v.dtype).transpose(1, 2)
        v = v.transpose(1, 2)
        rep = H // KV
        k = k.repeat_interleave(rep, dim=1)   # [B, H, T, hd]: head h -> kv head h // rep
        v = v.repeat_interleave(rep, dim=1)
        p_drop = cfg.dropout if self.training else 0.0
        if fast and hasattr(F, 'scaled_dot_product_attention'):
            o = F.scaled_dot_product_attention(q, k, v, dropout_p=p_drop, is_causal=True)
        else:
            s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            s = s.masked_fill(mask, float('-inf'))
            p = torch.softmax(s.float() if s.dtype != torch.float64 else s, dim=-1).to(v.dtype)
            p = F.dropout(p, p_drop, self.training)
            o = p @ v
        o = o.transpose(1, 2).reshape(B, T, H * hd)
        x = x + F.dropout(self.attn_output(o), p_drop, self.training)
        h = self.ffn_norm(x)
        f = self.ffn_down(F.silu(self.ffn_gate(h)) * self.ffn_up(h))
        return x + F.dropout(f, p_drop, self.training)


class Llama(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.token_embd = nn.Embedding(cfg.n_vocab, cfg.n_embd)
        self.blk = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.output_norm = RMSNorm(cfg.n_embd, cfg.eps)
        self.output = nn.Linear(cfg.n_embd, cfg.n_vocab, bias=False)
        self.apply(self._init)
        for b in self.blk:
            std = 0.02 / math.sqrt(2 * cfg.n_layer)
            nn.init.normal_(b.attn_output.weight, std=std)
            nn.init.normal_(b.ffn_down.weight, std=std)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, tokens, fast=True):
        """tokens [B, T] at positions 0..T-1 -> logits [B, T, n_vocab]."""
        B, T = tokens.shape
        x = self.token_embd(tokens)
        rdt = torch.float64 if x.dtype == torch.float64 else torch.float32
        cos, sin = rope_tables(self.cfg, T, tokens.device, rdt)
        x = F.dropout(x, self.cfg.dropout, self.training)
        for b in self.blk:
            x = b(x, cos, sin, fast)
        return self.output(self.output_norm(x))

    def gguf_tensors(self):
        """-> [(gguf_name, float32 numpy array in (out, in) order)] in file order.
        PyTorch state-dict names are the GGUF names (blk.N.* / token_embd / output*)."""
        sd = self.state_dict()
        names = ['token_embd.weight']
        for i in range(self.cfg.n_layer):
            names += [f'blk.{i}.{n}.weight' for n in ('attn_norm', 'attn_q', 'attn_k', 'attn_v', 'attn_output',
                                                     'ffn_norm', 'ffn_gate', 'ffn_up', 'ffn_down')]
        names += ['output_norm.weight', 'output.weight']
        assert set(names) == set(sd.keys()), sorted(set(sd.keys()) ^ set(names))
        return [(n, sd[n].detach().float().cpu().numpy()) for n in names]
