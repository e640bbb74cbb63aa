# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""tests/serve/test_api.py SB DATA — `sb serve` endpoints on the embedded model, --parallel 2:
/health, /v1/models, completions and chat (plain and SSE, OpenAI's shapes, [DONE] last, usage
chunk with stream_options.include_usage), greedy text equal to `sb run`'s (raw and --chat),
streamed text equal to the plain text, seed determinism, n > 1 (choice 0 = the n = 1 text),
stop strings, /tokenize and /detokenize round trip, 8 concurrent requests on 2 slots each equal to the same request alone, /metrics
counters moving, and every step plan built before /health said ok (none while serving)."""
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_lib import Server, check, finish, parse_sse, sb_run  # noqa: E402

sb = sys.argv[1]
P = "In the beginning"
Q = "Who begat Enos?"

s = Server(sb, ["--parallel", "2", "-t", "1"])
try:
    st, h, b = s.request("GET", "/health")
    check(st == 200 and b == b'{"status":"ok"}', "/health: %s %r" % (st, b))
    st, h, b = s.request("GET", "/v1/models")
    models = json.loads(b)
    check(st == 200 and models["object"] == "list" and models["data"][0]["object"] == "model"
          and models["data"][0]["id"] == "sonicboom-kjv-13m-q8_0.gguf", "/v1/models: %r" % b)
    m0 = s.metrics()
    # ready means warmed: every step class of 2 sequences (T 1..512, logit rows 1..2: 19) built before /health said ok
    check(m0["sonicboom_batch_plans_built_total"] == 19 and m0["sonicboom_batch_graph_captures_total"] == 0,
          "plans built before ready: %r" % m0["sonicboom_batch_plans_built_total"])

    # ---- completions: greedy equals sb run ----
    ref = sb_run(sb, ["-p", P, "-n", "16", "--temp", "0", "--ignore-eos", "--no-display-prompt", "--log-disable", "-t", "1"])
    st, r = s.post("/v1/completions", {"model": "x", "prompt": P, "max_tokens": 16, "temperature": 0, "ignore_eos": True})
    check(st == 200 and r["object"] == "text_completion" and r["id"].startswith("cmpl-"), "completion shape: %r" % r)
    text = r["choices"][0]["text"]
    check(text == ref, "greedy completion %r != sb run %r" % (text, ref))
    check(r["choices"][0]["finish_reason"] == "length" and r["choices"][0]["index"] == 0, "finish_reason: %r" % r)
    st, t = s.post("/tokenize", {"content": P, "add_special": True, "parse_special": False})
    u = r["usage"]
    check(u["prompt_tokens"] == len(t["tokens"]) and u["completion_tokens"] == 16 and u["total_tokens"] == u["prompt_tokens"] + 16,
          "usage %r vs %d prompt tokens" % (u, len(t["tokens"])))
    cached = u["prompt_tokens_details"]["cached_tokens"]
    check(isinstance(cached, int) and 0 <= cached <= u["prompt_tokens"], "cached_tokens: %r" % u)

    # ---- completions: stream equals plain ----
    st, h, raw = s.request("POST", "/v1/completions", {"prompt": P, "max_tokens": 16, "temperature": 0, "ignore_eos": True, "stream": True})
    objs, done, well = parse_sse(raw)
    check(st == 200 and h.get("content-type") == "text/event-stream" and done and well, "completion stream framing: %r" % raw[-200:])
    check(all(o["object"] == "text_completion" and o["id"] == objs[0]["id"] and "usage" not in o for o in objs), "stream chunk objects")
    check("".join(o["choices"][0]["text"] for o in objs) == ref, "streamed completion text != plain")
    check(objs[-1]["choices"][0]["finish_reason"] == "length" and all(o["choices"][0]["finish_reason"] is None for o in objs[:-1]),
          "finish_reason only on the last chunk")

    # ---- chat: greedy equals sb run --chat; stream with usage ----
    cref = sb_run(sb, ["--chat", "-p", Q, "-n", "12", "--temp", "0", "--ignore-eos", "--log-disable", "-t", "1"])
    body = {"messages": [{"role": "user", "content": Q}], "max_tokens": 12, "temperature": 0, "ignore_eos": True}
    st, r = s.post("/v1/chat/completions", body)
    check(st == 200 and r["object"] == "chat.completion" and r["choices"][0]["message"]["role"] == "assistant", "chat shape: %r" % r)
    check(r["choices"][0]["message"]["content"] == cref, "greedy chat %r != sb run --chat %r" % (r["choices"][0]["message"]["content"], cref))
    # content given as text parts is the same message
    parts = dict(body, messages=[{"role": "user", "content": [{"type": "text", "text": "Who begat "}, {"type": "text", "text": "Enos?"}]}])
    st, r2 = s.post("/v1/chat/completions", parts)
    check(st == 200 and r2["choices"][0]["message"]["content"] == cref, "chat with content parts: %r" % r2)
    st, h, raw = s.request("POST", "/v1/chat/completions", dict(body, stream=True, stream_options={"include_usage": True}))
    objs, done, well = parse_sse(raw)
    check(st == 200 and done and well, "chat stream framing")
    check(objs[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}, "first chunk: %r" % objs[0])
    check(all(o["object"] == "chat.completion.chunk" for o in objs), "chunk object names")
    check(objs[-1]["choices"] == [] and objs[-1]["usage"]["completion_tokens"] == 12, "usage chunk last: %r" % objs[-1])
    check(all(o["usage"] is None for o in objs[:-1]), "usage: null on the other chunks")
    check(objs[-2]["choices"][0]["finish_reason"] == "length" and objs[-2]["choices"][0]["delta"] == {}, "finish chunk: %r" % objs[-2])
    streamed = "".join(o["choices"][0]["delta"].get("content", "") for o in objs[:-1])
    check(streamed == cref, "streamed chat %r != %r" % (streamed, cref))

    # ---- seeds: same seed same text, another seed another text ----
    sp = {"prompt": P, "max_tokens": 24, "temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0, "ignore_eos": True}
    a = s.post("/v1/completions", dict(sp, seed=7))[1]["choices"][0]["text"]
    b2 = s.post("/v1/completions", dict(sp, seed=7))[1]["choices"][0]["text"]
    c = s.post("/v1/completions", dict(sp, seed=8))[1]["choices"][0]["text"]
    check(a == b2, "seed 7 twice: %r / %r" % (a, b2))
    check(a != c, "seed 7 and 8 gave the same text %r" % a)
    # n = 3: choice i uses seed + i; its choices decode together (continuous batching: another
    # matrix shape, so their draws may fall otherwise than alone), greedy ones exactly as alone
    st, r = s.post("/v1/completions", dict(sp, seed=7, n=3))
    ch = r["choices"]
    check(st == 200 and [x["index"] for x in ch] == [0, 1, 2], "n=3 indices: %r" % r)
    check(len({x["text"] for x in ch}) == 3, "n=3 seeded choices are not all distinct: %r" % [x["text"] for x in ch])
    check(r["usage"]["completion_tokens"] == 72, "n=3 completion_tokens: %r" % r["usage"])
    g1 = s.post("/v1/completions", dict(sp, temperature=0))[1]["choices"][0]["text"]
    g3 = s.post("/v1/completions", dict(sp, temperature=0, n=3))[1]["choices"]
    check([x["text"] for x in g3] == [g1] * 3, "greedy n=3 vs alone: %r / %r" % ([x["text"] for x in g3], g1))
    # without batching (-nocb: a session per slot, choices one after the other) choice 0 is the
    # n = 1 text and choice 1 the seed 8 one, exactly — with an f32 KV cache: in f16 the first
    # request's prefill and the later ones' re-evaluation of the cached prompt's last token sum
    # the rounded keys in other orders, so seeded draws may part
    s1 = Server(sb, ["-nocb", "-ctk", "f32"])
    try:
        a1 = s1.post("/v1/completions", dict(sp, seed=7))[1]["choices"][0]["text"]
        c1 = s1.post("/v1/completions", dict(sp, seed=8))[1]["choices"][0]["text"]
        ch = s1.post("/v1/completions", dict(sp, seed=7, n=3))[1]["choices"]
        check(ch[0]["text"] == a1 and ch[1]["text"] == c1, "-nocb n=3 choices vs single runs: %r" % [x["text"] for x in ch])
    finally:
        s1.stop()
    st, h, raw = s.request("POST", "/v1/chat/completions", dict(body, n=2, stream=True))
    objs, done, well = parse_sse(raw)
    roles = [o["choices"][0]["index"] for o in objs if o["choices"][0]["delta"].get("role")]
    check(done and well and roles == [0, 1], "n=2 stream: a role chunk per choice: %r" % roles)

    # ---- stop strings: cut before the stop string, finish_reason stop ----
    word = ref.split()[3]
    st, r = s.post("/v1/completions", {"prompt": P, "max_tokens": 16, "temperature": 0, "ignore_eos": True, "stop": [word, "zzzz"]})
    want = ref[:ref.index(word)]
    check(r["choices"][0]["text"] == want and r["choices"][0]["finish_reason"] == "stop",
          "stop %r: %r, want %r" % (word, r["choices"][0], want))
    st, r = s.post("/v1/completions", {"prompt": P, "max_tokens": 16, "temperature": 0, "ignore_eos": True, "stop": word})
    check(r["choices"][0]["text"] == want, "stop as a string")

    # ---- tokenize / detokenize ----
    st, t = s.post("/tokenize", {"content": P})
    check(st == 200 and all(isinstance(x, int) for x in t["tokens"]) and len(t["tokens"]) >= 2, "/tokenize: %r" % t)
    st, d = s.post("/detokenize", {"tokens": t["tokens"]})
    check(st == 200 and d["content"].strip() == P, "/detokenize round trip: %r" % d)
    st, tp = s.post("/tokenize", {"content": P, "with_pieces": True})
    check(st == 200 and [x["id"] for x in tp["tokens"]] == t["tokens"] and "".join(x["piece"] for x in tp["tokens"]).strip() == P,
          "/tokenize with_pieces: %r" % tp)

    # ---- concurrency: 8 requests at once on 2 slots, each reply equal to the same request alone ----
    prompts = ["In the beginning", "And God said", "The LORD is my shepherd", "Now these are the generations",
               "And it came to pass", "Blessed is the man", "Who begat Enos?", "Let there be light"]
    reqs = [({"prompt": p, "max_tokens": 12, "temperature": 0, "ignore_eos": True}, "/v1/completions") if i % 2 == 0 else
            ({"messages": [{"role": "user", "content": p}], "max_tokens": 12, "temperature": 0.9, "seed": i, "ignore_eos": True,
              "stream": True}, "/v1/chat/completions") for i, p in enumerate(prompts)]

    def reply_text(body, path):
        st, h, raw = s.request("POST", path, body)
        if body.get("stream"):
            objs, done, well = parse_sse(raw)
            return st, done and well, "".join(o["choices"][0]["delta"].get("content", "") for o in objs if o["choices"])
        r = json.loads(raw)
        return st, True, r["choices"][0]["text"]

    alone = [reply_text(b, path) for b, path in reqs]
    together = [None] * len(reqs)

    def worker(i):
        together[i] = reply_text(*reqs[i])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(reqs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # batched together: greedy replies exactly as alone, sampled ones complete (their draws may move)
    check(all(a[0] == 200 and a[1] for a in alone + together) and all(alone[i] == together[i] for i in range(0, len(reqs), 2)),
          "concurrent replies differ from the same requests alone:\n%r\n%r" % (alone, together))

    # ---- metrics moved ----
    m1 = s.metrics()
    check(m1["sonicboom_requests_total"] - m0["sonicboom_requests_total"] == 14 + 16, "requests_total moved by %r" %
          (m1["sonicboom_requests_total"] - m0["sonicboom_requests_total"]))
    check(m1["sonicboom_tokens_predicted_total"] - m0["sonicboom_tokens_predicted_total"] >= 16 + 16 + 12 * 3 + 24 * 3 + 72 + 24,
          "tokens_predicted_total moved too little")
    check(m1["sonicboom_prompt_tokens_total"] > m0["sonicboom_prompt_tokens_total"], "prompt_tokens_total did not move")
    check(m1["sonicboom_predicted_tokens_seconds"] > 0 and m1["sonicboom_slots"] == 2, "tok/s gauge, slots: %r" % m1)
    check(m1["sonicboom_batch_plans_built_total"] == m0["sonicboom_batch_plans_built_total"],
          "serving built %r plans (the warm-up should have built every one)" %
          (m1["sonicboom_batch_plans_built_total"] - m0["sonicboom_batch_plans_built_total"]))
    check(m1["sonicboom_requests_deferred"] == 0 and m1["sonicboom_requests_processing"] == 0, "idle gauges")
    st, h, b = s.request("GET", "/metrics")
    check(h["content-type"].startswith("text/plain") and b"# TYPE sonicboom_requests_total counter" in b, "metrics format")
finally:
    s.stop()
finish()
