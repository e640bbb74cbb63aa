#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""bench/serve_bench.py URL [--conc 1,8,32,64] [--prompt-words 96 | --prompt-tokens N] [--max-tokens 128]
                         [--seconds 30] [--temperature 0] [--top-k K]

Load an OpenAI-compatible server (sb serve, llama-server, ...) with C concurrent streaming clients,
each sending /v1/completions requests back to back (ignore_eos, max_tokens new tokens, a prompt of
about --prompt-words words, or of about --prompt-tokens tokens — the words per token measured once
through the server's POST /tokenize —, each prompt distinct from its first word on, so no prefix
cache helps), for --seconds at each concurrency. Python's standard library only.

Sampling is sent explicitly, the same to every server, so none falls back on its own defaults
(llama-server's: temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1.1 per its
/completion docs; sb serve's: llama.cpp's, without the repeat penalty): temperature (default 0),
top_k (default 1 at temperature 0 — greedy written so that every sampler chain is cut to one
candidate at its first truncation — else 40), top_p 1 / min_p 0 at temperature 0 (else 0.95 / 0.05),
repeat_penalty 1, presence / frequency penalty 0 and a seed per request. Fields a server does not
know are ignored by both (repeat_penalty is llama-server's).

Each row: replies, errors, output tok/s counted two ways — from the usage object the server reports
(`usage` column; "-" when it sent none) and from the streamed chunks that carry text (`chunks`) —,
mean completion tokens per reply (usage, else chunks), replies that ended before max_tokens
(finish_reason other than "length", or fewer tokens), time to first token p50 / p99 (ms, from
sending the request to the first chunk with text), and where the server reports llama-server's
`timings` object, its own mean decode ms per token (predicted_ms / predicted_n; "-" otherwise),
which splits server-side step time from HTTP and client costs."""
import argparse
import http.client
import json
import threading
import time
import urllib.parse

WORDS = ("and the lord said unto moses behold i will send thee into the land which i shall shew thee "
         "for the earth is full of his glory and the waters covered the face of the deep").split()


def prompt_for(k, n_words):
    """prompt k: its number first, so two prompts share no prefix past the first token"""
    return "%d " % k + " ".join(WORDS[(k * 7 + i) % len(WORDS)] for i in range(n_words))


def words_for_tokens(host, port, n_tokens):
    """the word count whose prompt the server tokenizes to about n_tokens (POST /tokenize, llama-server's)"""
    c = http.client.HTTPConnection(host, port, timeout=60)
    probe = 1000
    c.request("POST", "/tokenize", body=json.dumps({"content": prompt_for(12345, probe)}).encode(),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    body = r.read()
    c.close()
    if r.status != 200:
        raise SystemExit("POST /tokenize: HTTP %d %s" % (r.status, body[:200]))
    per_word = len(json.loads(body)["tokens"]) / probe
    return max(1, int(round(n_tokens / per_word)))


def sampling(temperature, top_k):
    """the sampling fields every request carries"""
    greedy = temperature == 0
    return {"temperature": temperature, "top_k": top_k if top_k is not None else (1 if greedy else 40),
            "top_p": 1.0 if greedy else 0.95, "min_p": 0.0 if greedy else 0.05, "repeat_penalty": 1.0,
            "presence_penalty": 0.0, "frequency_penalty": 0.0}


def one_request(host, port, body, timeout=600):
    """a dict: ok, ttft (seconds or None), usage_tokens (None: no usage), chunks (with text),
    finish (the last finish_reason), server_ms_per_tok (None: no timings)"""
    out = {"ok": False, "ttft": None, "usage_tokens": None, "prompt_tokens": None, "chunks": 0, "finish": None, "server_ms_per_tok": None}
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    t0 = time.time()
    c.request("POST", "/v1/completions", body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        r.read()
        c.close()
        return out
    while True:
        line = r.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: "):
            continue
        data = line[6:]
        if data == b"[DONE]":
            break
        o = json.loads(data)
        for ch in o.get("choices") or []:
            if ch.get("text"):
                out["chunks"] += 1
                if out["ttft"] is None:
                    out["ttft"] = time.time() - t0
            if ch.get("finish_reason"):
                out["finish"] = ch["finish_reason"]
        if o.get("usage"):
            out["usage_tokens"] = o["usage"].get("completion_tokens")
            out["prompt_tokens"] = o["usage"].get("prompt_tokens")
        t = o.get("timings")
        if t and t.get("predicted_n"):
            out["server_ms_per_tok"] = t.get("predicted_ms", 0) / t["predicted_n"]
    c.close()
    out["ok"] = True
    return out


def run_level(host, port, conc, a):
    stop_at = time.time() + a.seconds
    lock = threading.Lock()
    ttfts, server_ms, replies = [], [], []
    errors = [0]

    def client(k):
        i = 0
        while time.time() < stop_at:
            body = {"prompt": prompt_for(k * 1000 + i, a.prompt_words), "max_tokens": a.max_tokens, "ignore_eos": True,
                    "stream": True, "stream_options": {"include_usage": True}, "seed": k * 1000 + i}
            body.update(sampling(a.temperature, a.top_k))
            r = one_request(host, port, body)
            with lock:
                if r["ok"] and r["ttft"] is not None:
                    ttfts.append(r["ttft"])
                    replies.append(r)
                    if r["server_ms_per_tok"] is not None:
                        server_ms.append(r["server_ms_per_tok"])
                else:
                    errors[0] += 1
            i += 1

    t0 = time.time()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    ttfts.sort()
    pct = lambda q: 1e3 * ttfts[min(len(ttfts) - 1, int(q * len(ttfts)))] if ttfts else float("nan")
    n = len(replies)
    with_usage = [r for r in replies if r["usage_tokens"] is not None]
    usage_tps = sum(r["usage_tokens"] for r in with_usage) / wall if with_usage else None
    chunk_tps = sum(r["chunks"] for r in replies) / wall
    per_reply = [r["usage_tokens"] if r["usage_tokens"] is not None else r["chunks"] for r in replies]
    early = sum(1 for r, t in zip(replies, per_reply) if r["finish"] != "length" or t < a.max_tokens)
    ptoks = [r["prompt_tokens"] for r in replies if r["prompt_tokens"] is not None]
    return {"prompt_tokens": sum(ptoks) / len(ptoks) if ptoks else None, "replies": n, "errors": errors[0], "usage_tps": usage_tps, "partial_usage": 0 < len(with_usage) < n,
            "chunk_tps": chunk_tps, "mean_tokens": sum(per_reply) / n if n else float("nan"), "early": early,
            "p50": pct(0.5), "p99": pct(0.99), "server_ms": sum(server_ms) / len(server_ms) if server_ms else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--conc", default="1,8,32,64")
    ap.add_argument("--prompt-words", type=int, default=96)
    ap.add_argument("--prompt-tokens", type=int, default=None, help="about this many prompt tokens (overrides --prompt-words)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--top-k", type=int, default=None, help="default: 1 at temperature 0, else 40")
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    if a.prompt_tokens:
        a.prompt_words = words_for_tokens(u.hostname, u.port, a.prompt_tokens)
    print("sampling sent: %s, ignore_eos, max_tokens %d" % (json.dumps(sampling(a.temperature, a.top_k)), a.max_tokens))
    print("prompt: %d words" % a.prompt_words)
    print("| streams | replies | errors | tok/s (usage) | tok/s (chunks) | tokens/reply | prompt tokens | ended early "
          "| TTFT p50 ms | TTFT p99 ms | server ms/token |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in [int(x) for x in a.conc.split(",")]:
        r = run_level(u.hostname, u.port, c, a)
        usage = "-" if r["usage_tps"] is None else "%.1f%s" % (r["usage_tps"], " (some replies lacked usage)" if r["partial_usage"] else "")
        server = "-" if r["server_ms"] is None else "%.2f" % r["server_ms"]
        ptok = "-" if r["prompt_tokens"] is None else "%.0f" % r["prompt_tokens"]
        print("| %d | %d | %d | %s | %.1f | %.1f | %s | %d | %.0f | %.0f | %s |" % (c, r["replies"], r["errors"], usage, r["chunk_tps"],
              r["mean_tokens"], ptok, r["early"], r["p50"], r["p99"], server), flush=True)


if __name__ == "__main__":
    main()
