# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""tests/serve/test_queue.py SB DATA — scheduling of `sb serve --parallel 1 --queue-size 1`: with
the slot busy and one request waiting, the next gets HTTP 429 (rate_limit_error) at once; a
client that hangs up while queued is dropped from the queue, one that hangs up while generating
(plain or streaming) is stopped at the next token (cancelled counter moves, the slot is free again
long before its max_tokens would have been generated); a repeated prompt reuses the slot's cache
(cached_tokens); SIGTERM with a stream running ends it with an error event and [DONE], and
the server exits 0."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_lib import Server, check, finish  # noqa: E402

sb = sys.argv[1]
# a long job: 8 choices of 400 tokens each run to max_tokens (ignore_eos), seconds on one thread
LONG = {"prompt": "In the beginning", "max_tokens": 400, "n": 8, "ignore_eos": True, "temperature": 0}
TOTAL_LONG = 8 * 400

s = Server(sb, ["--parallel", "1", "--queue-size", "1", "-t", "1"])
try:
    busy = lambda v: v == 1  # noqa: E731
    a = s.raw_socket("/v1/completions", LONG)
    check(s.wait_metric("sonicboom_requests_processing", busy), "the first request never ran")
    b = s.raw_socket("/v1/completions", LONG)
    check(s.wait_metric("sonicboom_requests_deferred", busy), "the second request never queued")
    t0 = time.time()
    st, r = s.post("/v1/completions", {"prompt": "x", "max_tokens": 2})
    check(st == 429 and r["error"]["type"] == "rate_limit_error" and r["error"]["code"] == 429 and "queue" in r["error"]["message"],
          "queue full: want 429, got %s %r" % (st, r))
    check(time.time() - t0 < 5, "the 429 was not immediate")
    check(s.metrics()["sonicboom_requests_rejected_total"] == 1, "rejected counter")
    # the queued client hangs up: dropped from the queue
    b.close()
    check(s.wait_metric("sonicboom_requests_deferred", lambda v: v == 0), "a hung-up queued request stayed queued")
    check(s.wait_metric("sonicboom_requests_cancelled_total", lambda v: v == 1), "queued cancel not counted")
    # the running client hangs up: stopped at the next token
    a.close()
    t0 = time.time()
    check(s.wait_metric("sonicboom_requests_processing", lambda v: v == 0, timeout=10), "a hung-up running request kept running")
    m = s.metrics()
    check(m["sonicboom_requests_cancelled_total"] == 2 and m["sonicboom_requests_total"] == 0, "cancel counters: %r" % m)
    check(m["sonicboom_tokens_predicted_total"] < TOTAL_LONG, "the cancelled job generated all its tokens")
    # a streaming client that hangs up after the first events
    st_sock = s.raw_socket("/v1/completions", dict(LONG, stream=True))
    got = b""
    while b"data: " not in got:
        got += st_sock.recv(4096)
    check(got.startswith(b"HTTP/1.1 200") and b"text/event-stream" in got, "stream start: %r" % got[:200])
    before = s.metrics()["sonicboom_tokens_predicted_total"]
    st_sock.close()
    check(s.wait_metric("sonicboom_requests_cancelled_total", lambda v: v == 3, timeout=10), "a hung-up stream was not cancelled")
    check(s.wait_metric("sonicboom_requests_processing", lambda v: v == 0), "the slot stayed busy after a stream hang-up")
    check(s.metrics()["sonicboom_tokens_predicted_total"] - before < TOTAL_LONG, "the cancelled stream generated all its tokens")
    # the slot serves again, and a repeated prompt reuses its cache
    body = {"prompt": "And God said, Let there be light: and there was light. " * 4, "max_tokens": 4, "temperature": 0}
    st, r1 = s.post("/v1/completions", body)
    st2, r2 = s.post("/v1/completions", body)
    u = r2["usage"]
    check(st == 200 and st2 == 200 and r1["choices"][0]["text"] == r2["choices"][0]["text"], "repeat: %r / %r" % (r1, r2))
    # every whole KV block of the prompt (16 positions; a session per slot: all but the last token)
    cached = u["prompt_tokens_details"]["cached_tokens"]
    check(u["prompt_tokens"] > 32 and (u["prompt_tokens"] - 1) // 16 * 16 <= cached <= u["prompt_tokens"] - 1,
          "cached_tokens of a repeated prompt: %r" % u)
    # stopping with a stream running: cancelled, the stream ends with an error event and [DONE], exit 0
    a = s.raw_socket("/v1/completions", dict(LONG, stream=True))
    got = b""
    while b"data: " not in got:
        got += a.recv(4096)
finally:
    s.stop()
a.settimeout(30)
while True:
    more = a.recv(65536)
    if not more:
        break
    got += more
a.close()
hung = [line for line in s.err if line.endswith(": the client hung up; cancelled\n")]
check(len(hung) == 3 and not any("internal error" in line for line in s.err), "hang-up lines on stderr: %r" % s.err)
check(b'"message":"the server is shutting down"' in got and got.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n"),
      "a stream cut by SIGTERM: %r" % got[-300:])
finish()
