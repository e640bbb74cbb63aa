# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""tests/serve/load_lib.py — what the load tests share (test_load.py, test_nginx.py; Python stdlib):
a set of distinct streaming requests (chat and completions, greedy and seeded sampling, stop
strings, include_usage), one streamed reply reduced to what must not change (text of each choice,
finish reasons, usage), and the check of one reply against the reference of the same request run
alone: status 200, SSE framing with [DONE] last, one id on every chunk and never seen before (no
reply mixed with another), the right object type, text, finish_reason and usage."""
import http.client
import json

from serve_lib import parse_sse


def requests_set():
    """(path, body) pairs whose replies all differ; every body streams."""
    out = []
    prompts = ["In the beginning", "And God said", "The LORD is my shepherd", "Blessed are the", "And it came to pass"]
    for i, p in enumerate(prompts):
        out.append(("/v1/completions", {"prompt": p, "max_tokens": 12 + i, "temperature": 0, "ignore_eos": True, "stream": True}))
        out.append(("/v1/completions", {"prompt": p, "max_tokens": 10, "temperature": 0.9, "seed": 100 + i, "stream": True,
                                        "stream_options": {"include_usage": True}}))
    for i, q in enumerate(["Who begat Enos?", "Who was Noah?", "What is the law?"]):
        out.append(("/v1/chat/completions", {"messages": [{"role": "user", "content": q}], "max_tokens": 16, "temperature": 0,
                                             "stream": True, "stream_options": {"include_usage": True}}))
        out.append(("/v1/chat/completions", {"messages": [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": q}],
                                             "max_tokens": 12, "temperature": 0.7, "seed": 7 + i, "n": 2, "stream": True}))
    out.append(("/v1/completions", {"prompt": "In the beginning God created", "max_tokens": 24, "temperature": 0, "stop": [" and"],
                                    "stream": True}))
    return out


def stream(port, path, body, timeout=300):
    """POST a streaming request: (status, raw bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def reduce(status, raw, path):
    """A streamed reply -> (summary dict or None, id or None, what was wrong or None)."""
    if status != 200:
        return None, None, "HTTP %d: %r" % (status, raw[:200])
    objs, done, well = parse_sse(raw)
    if not (done and well and objs):
        return None, None, "framing: [DONE] last %s, well-formed %s, %d chunks; tail %r" % (done, well, len(objs), raw[-120:])
    ids = {o.get("id") for o in objs}
    want = "chat.completion.chunk" if "chat" in path else "text_completion"
    if len(ids) != 1 or any(o.get("object") != want or "error" in o for o in objs):
        return None, None, "chunk ids %r / objects / errors in %r" % (ids, raw[:300])
    texts, finish, usage = {}, {}, None
    for o in objs:
        if o.get("usage"):
            usage = o["usage"]
        for ch in o["choices"]:
            i = ch["index"]
            piece = ch["delta"].get("content", "") if "delta" in ch else ch.get("text", "")
            texts[i] = texts.get(i, "") + (piece or "")
            if ch.get("finish_reason"):
                if i in finish:
                    return None, None, "choice %d finished twice" % i
                finish[i] = ch["finish_reason"]
    if sorted(finish) != sorted(texts):
        return None, None, "choices without a finish_reason: %r vs %r" % (finish, texts)
    if usage is not None:
        usage = {k: usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    return {"texts": texts, "finish": finish, "usage": usage}, ids.pop(), None


def same_reply(summary, ref, body):
    """Does a reply under load equal the request's reply alone? Continuous batching evaluates a
    sequence together with whatever else runs (another matrix shape, so the last bits of the logits
    may differ): greedy replies must be identical, sampled ones identical in shape (choices, finish
    reasons, prompt tokens, no more tokens than asked) — their draws may fall otherwise."""
    if summary is None or ref is None:
        return False
    if body.get("temperature", 1.0) == 0:
        return summary == ref
    n = body.get("n", 1)
    if sorted(summary["texts"]) != list(range(n)) or any(f not in ("stop", "length") for f in summary["finish"].values()):
        return False
    u, r = summary["usage"], ref["usage"]
    if (u is None) != (r is None):
        return False
    return u is None or (u["prompt_tokens"] == r["prompt_tokens"] and u["completion_tokens"] <= n * body["max_tokens"])
