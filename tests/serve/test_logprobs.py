# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""tests/serve/test_logprobs.py SB DATA — the per-request sampling extras of `sb serve` on the
embedded model: chat logprobs (OpenAI's choices[].logprobs.content[]: token texts that join to the
reply, bytes that are the token's UTF-8, logprob <= 0, top_logprobs sorted, of the asked length,
greedy's choice first), the same entries streamed chunk by chunk, completions' legacy logprobs
(tokens, token_logprobs, top_logprobs, text_offset), logprobs absent = null and the greedy text
unchanged, logit_bias (+100 forces a token at every step, -100 bans the greedy one), and
presence / frequency penalties reaching the sampler (they change a greedy reply)."""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_lib import Server, check, finish, parse_sse  # noqa: E402

sb = sys.argv[1]
CHAT = "/v1/chat/completions"
COMP = "/v1/completions"
MSG = [{"role": "user", "content": "Who begat Enos?"}]
P = "In the beginning"


def token_id(s, text):
    """The one token id `text` tokenizes to (without BOS), checked to be one token."""
    st, t = s.post("/tokenize", {"content": text, "add_special": False, "with_pieces": True})
    check(st == 200 and len(t["tokens"]) == 1, "%r is one token: %r" % (text, t))
    return t["tokens"][0]["id"]


def check_entry(e, k, label):
    check(isinstance(e["token"], str) and e["logprob"] <= 0 and bytes(e["bytes"]).decode() == e["token"], label + ": entry %r" % e)
    top = e["top_logprobs"]
    check(len(top) == k and all(a["logprob"] <= 0 and bytes(a["bytes"]).decode() == a["token"] for a in top), label + ": top %r" % top)
    check(all(top[i]["logprob"] >= top[i + 1]["logprob"] for i in range(len(top) - 1)), label + ": top not sorted %r" % top)
    check(sum(math.exp(a["logprob"]) for a in top) <= 1 + 1e-5, label + ": top probabilities sum above 1")


s = Server(sb, ["-t", "2"])
try:
    # ---- chat, plain: entries join to the reply; greedy = the most likely token ----
    body = {"messages": MSG, "max_tokens": 12, "temperature": 0, "ignore_eos": True}
    st, plain = s.post(CHAT, body)
    check(st == 200 and plain["choices"][0]["logprobs"] is None, "no logprobs asked: null: %r" % plain)
    st, r = s.post(CHAT, dict(body, logprobs=True, top_logprobs=3))
    c = r["choices"][0]
    content = c["logprobs"]["content"]
    check(st == 200 and c["message"]["content"] == plain["choices"][0]["message"]["content"], "logprobs changed the greedy reply")
    check(len(content) == 12 and r["usage"]["completion_tokens"] == 12, "one entry per token: %d" % len(content))
    check("".join(e["token"] for e in content) == c["message"]["content"], "entries do not join to the reply")
    check(c["logprobs"].get("refusal", 0) is None, "refusal: null")
    for i, e in enumerate(content):
        check_entry(e, 3, "chat entry %d" % i)
        check(e["top_logprobs"][0]["token"] == e["token"] and e["top_logprobs"][0]["logprob"] == e["logprob"],
              "greedy token %d is not the most likely: %r" % (i, e))
    st, r0 = s.post(CHAT, dict(body, logprobs=True))
    check(st == 200 and all(e["top_logprobs"] == [] for e in r0["choices"][0]["logprobs"]["content"]), "top_logprobs absent: []")
    check([e["logprob"] for e in r0["choices"][0]["logprobs"]["content"]] == [e["logprob"] for e in content], "same logprobs with k=0")

    # ---- chat, stream: the chunks carry the same entries ----
    st, h, raw = s.request("POST", CHAT, dict(body, logprobs=True, top_logprobs=3, stream=True))
    objs, done, well = parse_sse(raw)
    check(st == 200 and done and well, "stream framing")
    streamed = []
    for o in objs:
        lp = o["choices"][0].get("logprobs", "absent")
        check(lp is None or isinstance(lp, dict), "chunk logprobs: %r" % lp)
        if lp:
            streamed += lp["content"]
            check(o["choices"][0]["delta"].get("content") == "".join(e["token"] for e in lp["content"]),
                  "a chunk's entries are its text: %r" % o)
    check(streamed == content, "streamed entries differ from the plain reply's")

    # ---- a temperature does not change the distribution the logprobs report ----
    st, rt = s.post(CHAT, dict(body, temperature=1.5, top_k=5, seed=3, max_tokens=1, logprobs=True, top_logprobs=5))
    st0, rg = s.post(CHAT, dict(body, max_tokens=1, logprobs=True, top_logprobs=5))
    check(rt["choices"][0]["logprobs"]["content"][0]["top_logprobs"] == rg["choices"][0]["logprobs"]["content"][0]["top_logprobs"],
          "top_logprobs depend on temperature / top_k")

    # ---- completions: legacy shape ----
    cb = {"prompt": P, "max_tokens": 10, "temperature": 0, "ignore_eos": True}
    st, cp = s.post(COMP, dict(cb, logprobs=2))
    ch = cp["choices"][0]
    lp = ch["logprobs"]
    check(st == 200 and sorted(lp) == ["text_offset", "token_logprobs", "tokens", "top_logprobs"], "legacy keys: %r" % lp)
    check("".join(lp["tokens"]) == ch["text"] and len(lp["tokens"]) == 10 == len(lp["token_logprobs"]) == len(lp["top_logprobs"]),
          "legacy tokens: %r" % lp)
    offs = [0]
    for t in lp["tokens"][:-1]:
        offs.append(offs[-1] + len(t.encode()))
    check(lp["text_offset"] == offs, "text_offset %r != %r" % (lp["text_offset"], offs))
    check(all(len(d) == 2 and max(d.values()) == lp["token_logprobs"][i] and d.get(lp["tokens"][i]) == lp["token_logprobs"][i]
              for i, d in enumerate(lp["top_logprobs"])), "legacy top_logprobs: %r" % lp["top_logprobs"])
    st, h, raw = s.request("POST", COMP, dict(cb, logprobs=2, stream=True))
    objs, done, well = parse_sse(raw)
    toks = [t for o in objs if o["choices"][0]["logprobs"] for t in o["choices"][0]["logprobs"]["tokens"]]
    check(done and well and toks == lp["tokens"], "streamed legacy tokens %r != %r" % (toks, lp["tokens"]))
    st, c0 = s.post(COMP, dict(cb, logprobs=0))
    check(all(d == {} for d in c0["choices"][0]["logprobs"]["top_logprobs"]) and c0["choices"][0]["logprobs"]["token_logprobs"]
          == lp["token_logprobs"], "logprobs 0: the chosen tokens only")

    # ---- n > 1 with logprobs: each choice its own ----
    st, rn = s.post(COMP, dict(cb, n=2, temperature=1.0, seed=5, logprobs=1))
    check(st == 200 and all("".join(c["logprobs"]["tokens"]) == c["text"] for c in rn["choices"]), "n=2: per-choice logprobs")

    # ---- logit_bias ----
    lord = token_id(s, "LORD")
    st, rb = s.post(COMP, dict(cb, max_tokens=5, logit_bias={str(lord): 100}, logprobs=0))
    check(st == 200 and rb["choices"][0]["text"] == " LORD" * 5, "+100 forces the token: %r" % rb["choices"][0]["text"])
    check(all(x > -1e-3 for x in rb["choices"][0]["logprobs"]["token_logprobs"]), "a +100 token has probability ~1: %r" % rb)
    first = lp["tokens"][0]
    fid = token_id(s, first.lstrip(" "))
    st, rb = s.post(COMP, dict(cb, max_tokens=3, logit_bias={str(fid): -100}, logprobs=1))
    check(st == 200 and rb["choices"][0]["logprobs"]["tokens"][0] != first, "-100 bans the greedy token %r: %r" % (first, rb))
    st, rz = s.post(COMP, dict(cb, logit_bias={}))
    check(st == 200 and rz["choices"][0]["text"] == ch["text"], "an empty logit_bias changes nothing")

    # ---- presence / frequency penalties reach the sampler ----
    long = dict(cb, max_tokens=24)
    st, base = s.post(COMP, long)
    for name in ("presence_penalty", "frequency_penalty"):
        st, pen = s.post(COMP, dict(long, **{name: 2.0}))
        check(st == 200 and pen["choices"][0]["text"] != base["choices"][0]["text"], "%s 2 changed nothing" % name)
        st, zero = s.post(COMP, dict(long, **{name: 0}))
        check(st == 200 and zero["choices"][0]["text"] == base["choices"][0]["text"], "%s 0 changed the reply" % name)
finally:
    s.stop()
finish()
