#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""bench/serve_bench.py URL [--conc 1,8,32,64] [--prompt-words 96] [--max-tokens 128] [--seconds 30]

Load an OpenAI-compatible server (sb serve, llama-server, ...) with C concurrent streaming clients,
each sending /v1/completions requests back to back (greedy, ignore_eos, max_tokens new tokens, a
prompt of about --prompt-words words, distinct per client so no prefix cache helps), for --seconds
at each concurrency. Prints one row per C: replies, aggregate output tok/s (completion tokens the
server reports / wall time), and time to first token p50 / p99 (ms, from sending the request to
the first chunk with text). Python's standard library only."""
import argparse
import http.client
import json
import threading
import time
import urllib.parse

WORDS = ("and the lord said unto moses behold i will send thee into the land which i shall shew thee "
         "for the earth is full of his glory and the waters covered the face of the deep").split()


def prompt_for(k, n_words):
    return " ".join(WORDS[(k * 7 + i) % len(WORDS)] for i in range(n_words)) + " %d" % k


def one_request(host, port, body, timeout=600):
    """(ttft seconds or None, completion tokens, ok)"""
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    t0 = time.time()
    c.request("POST", "/v1/completions", body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        r.read()
        c.close()
        return None, 0, False
    ttft, tokens = None, 0
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
        if ttft is None and any(ch.get("text") for ch in o.get("choices", [])):
            ttft = time.time() - t0
        if o.get("usage"):
            tokens = o["usage"].get("completion_tokens", 0)

    c.close()
    return ttft, tokens, True


def run_level(host, port, conc, n_words, max_tokens, seconds):
    stop_at = time.time() + seconds
    lock = threading.Lock()
    ttfts, totals = [], {"tokens": 0, "replies": 0, "errors": 0}

    def client(k):
        i = 0
        while time.time() < stop_at:
            body = {"prompt": prompt_for(k * 1000 + i, n_words), "max_tokens": max_tokens, "temperature": 0,
                    "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
            ttft, tokens, ok = one_request(host, port, body)
            with lock:
                if ok and ttft is not None:
                    ttfts.append(ttft)
                    totals["tokens"] += tokens
                    totals["replies"] += 1
                else:
                    totals["errors"] += 1
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
    return totals["replies"], totals["errors"], totals["tokens"] / wall, pct(0.5), pct(0.99)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--conc", default="1,8,32,64")
    ap.add_argument("--prompt-words", type=int, default=96)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=30)
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    print("| streams | replies | errors | output tok/s | TTFT p50 ms | TTFT p99 ms |")
    print("|---:|---:|---:|---:|---:|---:|")
    for c in [int(x) for x in a.conc.split(",")]:
        n, err, tps, p50, p99 = run_level(u.hostname, u.port, c, a.prompt_words, a.max_tokens, a.seconds)
        print("| %d | %d | %d | %.1f | %.0f | %.0f |" % (c, n, err, tps, p50, p99), flush=True)


if __name__ == "__main__":
    main()
