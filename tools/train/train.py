#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""Train the embedded model (issue 7) and export its F32 GGUF and oracle logits.

Development tool, run on the GPU machine (models/README.md, "Regenerate", says how); --smoke runs
a tiny configuration on the CPU for a few steps to check the whole pipeline.
Data: DATA/{train,valid,heldout}.bin (uint16 ids from tokenize_corpus.py) and
DATA/tokenizer.json. Every training window is [BOS] + 511 consecutive corpus tokens
(random offset), predicting the next 512 tokens: the same BOS-first layout as a
prompt at run time (add_bos) and as every perplexity chunk.
Runs: one or more (dropout, lr, steps) settings of the same architecture, each with
AdamW (betas 0.9/0.95, weight decay 0.1 on matrices), linear warm-up then cosine decay
to 10%, bf16 autocast on CUDA, grad clip 1.0; the checkpoint with the lowest loss on
valid.bin (Galatians..Philippians) is kept; held-out loss is reported, never used.
Outputs (OUT/): model-f32.gguf (split into <= 15 MiB parts model-f32.gguf.partN when
--split), embedded-oracle.ref (SBREF1: float64 CPU logits of the final weights stored as
f32 for BOS + 47 held-out tokens, then 16 greedy tokens), train.log.
"""
import argparse
import copy
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_gguf  # noqa: E402
import llama_ref  # noqa: E402
import spm  # noqa: E402
from model import Config, Llama  # noqa: E402

LOG = None


def log(*a):
    s = ' '.join(str(x) for x in a)
    print(s, flush=True)
    if LOG:
        LOG.write(s + '\n')
        LOG.flush()


def get_batch(stream, B, T, bos, gen):
    n = stream.numel()
    offs = torch.randint(0, n - T, (B,), device=stream.device, generator=gen)
    ar = torch.arange(T, device=stream.device)
    y = stream[offs[:, None] + ar[None, :]]
    x = torch.cat([torch.full((B, 1), bos, dtype=y.dtype, device=y.device), y[:, :-1]], dim=1)
    return x, y


@torch.no_grad()
def evaluate(model, stream, T, bos, B=32, amp=True):
    """Mean next-token loss over non-overlapping windows [BOS] + 511 tokens -> 512 targets."""
    model.eval()
    n = stream.numel()
    offs = list(range(0, n - T + 1, T - 1))
    tot, cnt = 0.0, 0
    for i in range(0, len(offs), B):
        o = torch.tensor(offs[i:i + B], device=stream.device)
        ar = torch.arange(T, device=stream.device)
        y = stream[o[:, None] + ar[None, :]]
        x = torch.cat([torch.full((len(o), 1), bos, dtype=y.dtype, device=y.device), y[:, :-1]], dim=1)
        with torch.autocast(device_type=stream.device.type, dtype=torch.bfloat16, enabled=amp):
            logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1), reduction='sum')
        tot += loss.item()
        cnt += y.numel()
    model.train()
    return tot / cnt


def lr_at(step, steps, lr, warm):
    if step < warm:
        return lr * (step + 1) / warm
    p = (step - warm) / max(1, steps - warm)
    return lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, p))))


def train_run(cfg, run, data, dev, amp, seed):
    torch.manual_seed(seed)
    gen = torch.Generator(device=dev)
    gen.manual_seed(seed)
    model = Llama(cfg).to(dev)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{'params': decay, 'weight_decay': 0.1}, {'params': no_decay, 'weight_decay': 0.0}]
    try:
        opt = torch.optim.AdamW(groups, lr=run['lr'], betas=(0.9, 0.95), fused=(dev.type == 'cuda'))
    except TypeError:
        opt = torch.optim.AdamW(groups, lr=run['lr'], betas=(0.9, 0.95))
    B, T, steps = run['batch'], cfg.n_ctx, run['steps']
    warm = max(1, steps // 30)
    best, best_step, best_state = float('inf'), -1, None
    t0 = time.time()
    tr = 0.0
    for step in range(steps):
        for g in opt.param_groups:
            g['lr'] = lr_at(step, steps, run['lr'], warm)
        x, y = get_batch(data['train'], B, T, data['bos'], gen)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=amp):
            logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, cfg.n_vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if (step + 1) % run['eval_every'] == 0 or step + 1 == steps:
            tr = loss.item()
            va = evaluate(model, data['valid'], T, data['bos'], amp=amp)
            if va < best:
                best, best_step = va, step + 1
                best_state = {k: v.detach().float().cpu().clone() for k, v in model.state_dict().items()}
            log(f'  step {step + 1:5d}  train {tr:.4f}  valid {va:.4f}  lr {opt.param_groups[0]["lr"]:.2e}'
                f'  {time.time() - t0:6.1f}s')
    model.load_state_dict(best_state)
    return model, dict(run, best_valid=best, best_step=best_step, seconds=time.time() - t0, last_train=tr)


@torch.no_grad()
def greedy(model, vocab, prompt, n, dev):
    model.eval()
    ids = vocab.encode(prompt)
    for _ in range(n):
        logits = model(torch.tensor([ids], device=dev), fast=False)[0, -1]
        ids.append(int(logits.argmax()))
    return vocab.decode(ids)


@torch.no_grad()
def oracle(model, heldout_ids, bos, n_prompt, n_decode):
    """float64 CPU logits for [BOS] + held-out prefix, then greedy decode; stored as f32."""
    m = copy.deepcopy(model).cpu().double().eval()
    toks = [bos] + [int(t) for t in heldout_ids[:n_prompt - 1]]
    for _ in range(n_decode):
        lg = m(torch.tensor([toks]), fast=False)[0, -1]
        toks.append(int(lg.argmax()))
    logits64 = m(torch.tensor([toks]), fast=False)[0]
    m32 = copy.deepcopy(model).cpu().float().eval()
    logits32 = m32(torch.tensor([toks]), fast=False)[0]
    return toks, logits64.numpy(), logits32.numpy()


def main():
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument('--data', required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--runs', default='[{"dropout":0.2,"lr":1e-3,"steps":3000}]',
                    help='JSON list of {dropout, lr, steps[, batch, eval_every]}')
    ap.add_argument('--arch', default='{}', help='JSON Config overrides (n_embd, n_layer, ...)')
    ap.add_argument('--time-limit', type=float, default=1e9, help='skip runs that would not fit (seconds)')
    ap.add_argument('--name', default='sonicboom-kjv')
    ap.add_argument('--split', action='store_true', help='split model-f32.gguf into 15 MiB parts')
    ap.add_argument('--smoke', action='store_true', help='tiny CPU configuration')
    ap.add_argument('--seed', type=int, default=1234)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    LOG = open(os.path.join(a.out, 'train.log'), 'w')
    t_start = time.time()
    dev = torch.device('cuda' if torch.cuda.is_available() and not a.smoke else 'cpu')
    amp = dev.type == 'cuda'
    if dev.type == 'cuda':
        torch.backends.cuda.matmul.allow_tf32 = True
        log('device', torch.cuda.get_device_name(0), 'torch', torch.__version__)
    vocab = spm.Vocab.load_json(os.path.join(a.data, 'tokenizer.json'))
    data = {'bos': vocab.bos}
    for k in ('train', 'valid', 'heldout'):
        arr = np.fromfile(os.path.join(a.data, k + '.bin'), dtype='<u2').astype(np.int64)
        data[k] = torch.from_numpy(arr).to(dev)
        log(f'{k}: {arr.size} tokens')
    arch = dict(n_vocab=len(vocab.tokens))
    if a.smoke:
        arch.update(n_embd=64, n_layer=2, n_head=4, n_head_kv=2, n_ff=128, n_ctx=64)
    arch.update(json.loads(a.arch))
    runs = json.loads(a.runs)
    with torch.no_grad():   # the fast attention path (SDPA) must equal the explicit one
        m = Llama(Config(**arch)).to(dev).eval()
        x = torch.randint(0, arch['n_vocab'], (2, 64), device=dev)
        e = llama_ref.nmse(m(x, fast=True).float().cpu().numpy(), m(x, fast=False).float().cpu().numpy())
        log(f'sanity: fast vs explicit attention nmse {e:.3e}')
        if e > 1e-6:
            sys.exit('train: fast attention path disagrees')
        del m
    results = []
    best_model, best_val = None, float('inf')
    for i, run in enumerate(runs):
        run.setdefault('batch', 32)
        run.setdefault('eval_every', 100)
        elapsed = time.time() - t_start
        if results:
            per_step = sum(r['seconds'] for r in results) / sum(r['steps'] for r in results)
            if elapsed + per_step * run['steps'] * 1.05 > a.time_limit:
                log(f'run {i}: skipped, {per_step * run["steps"]:.0f}s would pass the time limit')
                continue
        cfg = Config(**dict(arch, dropout=run['dropout']))
        nparam = sum(p.numel() for p in Llama(cfg).parameters())
        log(f'run {i}: {json.dumps(run)}  arch {json.dumps(cfg.to_dict())}  params {nparam}')
        model, res = train_run(cfg, run, data, dev, amp, a.seed + i)
        res['params'] = nparam
        results.append(res)
        log(f'run {i}: best valid {res["best_valid"]:.4f} at step {res["best_step"]}, {res["seconds"]:.1f}s')
        if res['best_valid'] < best_val:
            best_val, best_model, best_cfg = res['best_valid'], model, cfg
        else:
            del model
    model = best_model
    T = model.cfg.n_ctx
    ho = evaluate(model, data['heldout'], T, vocab.bos, amp=amp)
    va = evaluate(model, data['valid'], T, vocab.bos, amp=amp)
    ho32 = evaluate(model, data['heldout'], T, vocab.bos, amp=False)
    log(f'chosen: valid {va:.4f}  heldout {ho:.4f} (bf16)  heldout {ho32:.4f} (f32, ppl {math.exp(ho32):.2f})')
    for p in ('In the beginning', 'And Jesus said unto them,', 'The LORD is my shepherd;'):
        log('sample:', repr(greedy(model, vocab, p, 48, dev)))
    model.cfg.dropout = 0.0
    n_prompt, n_decode = 48, 16
    toks, lg64, lg32 = oracle(model, data['heldout'].cpu().numpy(), vocab.bos, n_prompt, n_decode)
    log(f'oracle: {len(toks)} tokens, nmse(f32 torch, f64 torch) = {llama_ref.nmse(lg32, lg64):.3e}')
    llama_ref.write_ref(os.path.join(a.out, 'embedded-oracle.ref'), toks, lg64, n_prompt, n_decode)
    cfgd = best_cfg.to_dict()
    path = os.path.join(a.out, 'model-f32.gguf')
    nbytes = export_gguf.write_model(path, cfgd, model.gguf_tensors(), vocab, 'f32', a.name)
    log(f'wrote {path}: {nbytes} bytes')
    summary = dict(config=cfgd, runs=results, chosen_valid=va, heldout_loss_f32=ho32, heldout_loss_bf16=ho,
                   total_seconds=time.time() - t_start)
    log('summary: ' + json.dumps(summary))
    if a.split:
        part = 15 << 20
        with open(path, 'rb') as f:
            blob = f.read()
        for k in range(0, len(blob), part):
            with open(f'{path}.part{k // part}', 'wb') as g:
                g.write(blob[k:k + part])
        os.remove(path)
    LOG.close()


if __name__ == '__main__':
    main()
