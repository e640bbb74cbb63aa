# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""tests/serve/test_errors.py SB DATA — every refusal of `sb serve` is an OpenAI error object
{"error": {"code", "message", "type", "param"}} with the right status and a message naming the
field: malformed bodies, each bad field type or value, every bound (messages, n, stop strings and
their length, body bytes), truncated and randomly mutated bodies, context overflow (exceed_context_size_error, before any work: the
generated-token counter does not move), unsupported fields refused, 404, 405 with Allow. The
server is still healthy afterwards."""
import json
import os
import random
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_lib import Server, check, finish  # noqa: E402

sb = sys.argv[1]
s = Server(sb, ["-t", "1", "-c", "64"])  # a small context: a mutated max_tokens key generates little
CHAT, COMP = "/v1/chat/completions", "/v1/completions"
MSG = [{"role": "user", "content": "hi"}]


errors_sent = 5  # 413 twice, 404, 405 twice; expect() counts the rest


def expect(path, body, want, status=400, etype="invalid_request_error", raw=None):
    global errors_sent
    errors_sent += 1
    st, h, b = s.request("POST", path, body, raw=raw)
    try:
        e = json.loads(b)["error"]
    except (ValueError, KeyError, TypeError):
        check(False, "%s %r: not an error object: %s %r" % (path, body if raw is None else raw[:60], st, b[:200]))
        return
    check(st == status and e.get("code") == status and e.get("type") == etype and want in e.get("message", "") and "param" in e,
          "%s %r: want %d %s %r, got %d %r" % (path, body if raw is None else raw[:60], status, etype, want, st, e))


m0 = s.metrics()
try:
    # ---- bodies ----
    expect(CHAT, None, "malformed JSON", raw=b'{"messages": [')
    expect(CHAT, None, "malformed JSON", raw=b'{"messages": []} trailing')
    expect(CHAT, None, "must be a JSON object", raw=b'[1, 2]')
    expect(CHAT, None, "empty", raw=b'')
    expect(CHAT, None, "NUL", raw=b'{"messages": [{"role": "user", "content": "a\\u0000b"}]}')
    expect(CHAT, None, "NUL", raw=b'{"messages": [{"role": "user", "content": "a\x00b"}]}')
    # over the cap: refused from the declared length before the body is read, or while a chunked
    # body is read; the client may see its send cut short (the server closes), never a hang
    for chunked in (False, True):
        sock = socket.create_connection(("127.0.0.1", s.port), timeout=30)
        head = "POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n" % CHAT
        head += "Transfer-Encoding: chunked\r\n\r\n" if chunked else "Content-Length: %d\r\n\r\n" % (5 << 20)
        try:
            sock.sendall(head.encode())
            piece = b"x" * 65536
            for _ in range(80):
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass
        reply = b""
        try:
            while True:
                got = sock.recv(65536)
                if not got:
                    break
                reply += got
        except OSError:
            pass
        sock.close()
        check(reply.startswith(b"HTTP/1.1 413") and b"larger than 4194304 bytes" in reply,
              "413 (chunked %s): %r" % (chunked, reply[:300]))
    # ---- chat messages ----
    expect(CHAT, {}, "'messages'")
    expect(CHAT, {"messages": "hi"}, "'messages'")
    expect(CHAT, {"messages": []}, "1 to 1024 messages")
    expect(CHAT, {"messages": MSG * 1025}, "1 to 1024 messages")
    expect(CHAT, {"messages": [5]}, "'messages[0]' must be an object")
    expect(CHAT, {"messages": [{"role": "tool", "content": "x"}]}, "'messages[0].role'")
    expect(CHAT, {"messages": [{"role": 1, "content": "x"}]}, "'messages[0].role'")
    expect(CHAT, {"messages": [{"role": "user", "content": 5}]}, "'messages[0].content'")
    expect(CHAT, {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, "no images")
    # ---- numbers: type and range ----
    for field, value, want in [
        ("max_tokens", "5", "'max_tokens' must be an integer"), ("max_tokens", 1.5, "'max_tokens' must be an integer"),
        ("max_tokens", 0, "'max_tokens' must be in"), ("max_tokens", -1, "'max_tokens' must be in"),
        ("max_completion_tokens", True, "'max_completion_tokens' must be an integer"),
        ("temperature", "hot", "'temperature' must be a number"), ("temperature", 3, "'temperature' must be in"),
        ("temperature", -0.5, "'temperature' must be in"), ("top_p", 1.5, "'top_p' must be in"),
        ("top_k", -1, "'top_k' must be in"), ("top_k", 2.5, "'top_k' must be an integer"), ("min_p", 2, "'min_p' must be in"),
        ("presence_penalty", 3, "'presence_penalty' must be in"), ("frequency_penalty", "x", "'frequency_penalty' must be a number"),
        ("seed", "x", "'seed' must be an integer"), ("seed", -2, "'seed' must be in"), ("seed", 1e300, "'seed' must be in"),
        ("n", 0, "'n' must be in"), ("n", 9, "'n' must be in"), ("n", "2", "'n' must be an integer"),
        ("stream", "yes", "'stream' must be true or false"), ("ignore_eos", 1, "'ignore_eos' must be true or false"),
        ("stream_options", {"include_usage": True}, "only allowed when 'stream' is true"),
        ("stop", 5, "'stop' must be a string or an array"), ("stop", [1], "'stop[0]' must be a string"),
        ("stop", ["a"] * 17, "at most 16"), ("stop", [""], "'stop[0]' must be 1 to 256 bytes"),
        ("stop", ["x" * 257], "'stop[0]' must be 1 to 256 bytes"), ("model", 5, "'model' must be a string"),
        ("logprobs", 2, "'logprobs' must be true or false"), ("top_logprobs", 2, "'top_logprobs' needs 'logprobs': true"),
        ("logit_bias", [1, 5], "'logit_bias' must be an object"), ("logit_bias", {"x": 5}, "key 'x' must be a token id"),
        ("logit_bias", {"-1": 5}, "key '-1' must be a token id"), ("logit_bias", {"99999": 5}, "key '99999' must be a token id"),
        ("logit_bias", {"1.5": 5}, "key '1.5' must be a token id"), ("logit_bias", {"1": 101}, "'logit_bias[\"1\"]' must be a number"),
        ("logit_bias", {"1": "5"}, "must be a number in [-100, 100]"),
        ("logit_bias", {str(i): 1 for i in range(1025)}, "'logit_bias' has 1025 entries, at most 1024"),
        ("tools", [{"type": "function", "function": {"name": "f"}}], "'tools' is not supported"),
        ("response_format", {"type": "json_object"}, "'response_format' is not supported"),
    ]:
        expect(CHAT, {"messages": MSG, field: value}, want)
    expect(CHAT, {"messages": MSG, "stream": True, "stream_options": 3}, "'stream_options' must be an object")
    expect(CHAT, {"messages": MSG, "logprobs": True, "top_logprobs": 21}, "'top_logprobs' must be in [0, 20]")
    expect(CHAT, {"messages": MSG, "logprobs": True, "top_logprobs": 1.5}, "'top_logprobs' must be an integer")
    expect(CHAT, {"messages": MSG, "logprobs": False, "top_logprobs": 0}, "'top_logprobs' needs 'logprobs': true")
    expect(COMP, {"prompt": "x", "logprobs": True}, "'logprobs' must be an integer")
    expect(COMP, {"prompt": "x", "logprobs": 21}, "'logprobs' must be in [0, 20]")
    expect(COMP, {"prompt": "x", "logit_bias": {"5": 1, "05": 2}}, "gives token 5 twice")
    expect(CHAT, {"messages": MSG, "stream": True, "stream_options": {"include_usage": "y"}}, "'include_usage' must be true or false")
    # ---- completions' prompt ----
    expect(COMP, {}, "'prompt' must be a string")
    expect(COMP, {"prompt": 123}, "'prompt' must be a string")
    expect(COMP, {"prompt": ["a", "b"]}, "'prompt[0]' must be a token id")
    expect(COMP, {"prompt": [1, 99999]}, "'prompt[1]' must be a token id")
    expect(COMP, {"prompt": []}, "the prompt is empty")
    expect(COMP, {"prompt": "x", "echo": True}, "'echo' is not supported")
    expect(COMP, {"prompt": "x", "suffix": "y"}, "'suffix' is not supported")
    expect(COMP, {"prompt": "x", "best_of": 3}, "'best_of' is not supported")
    # ---- context: 400 exceed_context_size_error before any work ----
    expect(COMP, {"prompt": "x", "max_tokens": 600}, "more than the context of 64", etype="exceed_context_size_error")
    expect(COMP, {"prompt": "In the beginning " * 200}, "more than the context of 64", etype="exceed_context_size_error")
    expect(CHAT, {"messages": [{"role": "user", "content": "and it was so " * 200}], "stream": True}, "more than the context",
           etype="exceed_context_size_error")
    # ---- tokenize / detokenize ----
    expect("/tokenize", {}, "'content' must be a string")
    expect("/tokenize", {"content": "x", "with_pieces": "yes"}, "'with_pieces' must be true or false")
    expect("/detokenize", {"tokens": "x"}, "'tokens' must be an array")
    expect("/detokenize", {"tokens": [1, -1]}, "'tokens[1]' must be a token id")
    expect("/detokenize", {"tokens": [4096]}, "'tokens[0]' must be a token id")
    # ---- routes and methods ----
    st, h, b = s.request("GET", "/v1/nothing")
    check(st == 404 and json.loads(b)["error"]["type"] == "not_found_error", "404: %s %r" % (st, b))
    st, h, b = s.request("GET", COMP)
    check(st == 405 and h.get("allow") == "POST" and "method not allowed" in json.loads(b)["error"]["message"], "405 GET: %s %r" % (st, h))
    st, h, b = s.request("POST", "/health", {})
    check(st == 405 and h.get("allow") == "GET", "405 POST /health: %s %r" % (st, h))
    # ---- fuzz-style: every truncation of a good body, and 200 random byte mutations of it (fixed
    # seed): each gets a JSON reply, 400 (or 200 when still valid: nothing short, nothing hangs) ----
    good = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "stop": ["x"], "n": 1}).encode()
    rng = random.Random(28)
    bodies = [good[:k] for k in range(len(good))]
    for _ in range(200):
        b = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        bodies.append(bytes(b))
    bad_replies, generated = [], 0
    for b in bodies:
        st, h, reply = s.request("POST", CHAT, raw=b)
        try:
            obj = json.loads(reply)
            well = (st == 400 and "message" in obj["error"]) or (st == 200 and obj["object"] == "chat.completion")
            generated += obj["usage"]["completion_tokens"] if st == 200 else 0
        except (ValueError, KeyError, TypeError):
            well = False
        if not well:
            bad_replies.append((b, st, reply[:120]))
        errors_sent += st != 200
    check(not bad_replies, "fuzzed bodies: %d bad replies, first %r" % (len(bad_replies), bad_replies[:1]))

    # ---- nothing was generated, and the server is fine ----
    m1 = s.metrics()
    moved = m1["sonicboom_tokens_predicted_total"] - m0["sonicboom_tokens_predicted_total"]
    check(moved == generated, "tokens generated %r, but the 200 replies account for %d: an error request generated tokens" % (moved, generated))
    check(m1["sonicboom_requests_failed_total"] == 0, "failed requests: %r" % m1)
    moved = m1["sonicboom_http_errors_total"] - m0["sonicboom_http_errors_total"]
    check(moved == errors_sent, "http_errors_total moved by %r, want %d" % (moved, errors_sent))
    st, r = s.post(COMP, {"prompt": "In the beginning", "max_tokens": 4})
    check(st == 200 and r["usage"]["completion_tokens"] >= 1, "a good request after the bad ones: %r" % r)
finally:
    s.stop()
finish()
