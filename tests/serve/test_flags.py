# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""tests/serve/test_flags.py SB DATA — `sb serve`'s command line: --help (exit 0), usage errors
(exit 2, one line: unknown flag, bad numbers, a non-loopback --host without --api-key), a model
that does not load and a port in use (exit 1, one "error:" line), -ngl without a GPU (a warning,
then the CPU), -a alias in /v1/models, and --api-key: 401 without or with a wrong key on every
endpoint but /health, 200 with it; --no-mmap (the model read into memory) serves the same greedy
completion as the mapped model."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_lib import Server, check, finish  # noqa: E402

sb = sys.argv[1]


def run(args, timeout=60):
    p = subprocess.run([sb, "serve"] + args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


rc, out, err = run(["--help"])
check(rc == 0 and out.startswith("usage: sb serve") and "--parallel" in out and "--api-key" in out, "--help: %s %r" % (rc, err))
for args, want in [(["--bogus"], "unknown option '--bogus'"), (["-np", "0"], "-np"), (["--parallel", "65"], "--parallel"),
                   (["--port", "70000"], "--port"), (["--queue-size", "0"], "--queue-size"), (["-c", "x"], "-c"),
                   (["--host", "0.0.0.0"], "--api-key"), (["--api-key", ""], "--api-key"), (["-m"], "-m"),
                   (["--kv-type", "q8_0"], "--kv-type 'q8_0'"), (["-ctk", "f16", "-ctv", "f32"], "share one cache type")]:
    rc, out, err = run(args)
    check(rc == 2 and err.count("\n") == 1 and want in err, "%r: want exit 2 naming %r, got %s %r" % (args, want, rc, err))
rc, out, err = run(["-m", "/nonexistent/model.gguf"])
check(rc == 1 and err.strip().splitlines()[-1].startswith("error: SB_ERR_IO") and "/nonexistent/model.gguf" in err,
      "missing model: %s %r" % (rc, err))
rc, out, err = run(["--host", "not-an-address", "--api-key", "k"])
check(rc == 1 and "error: SB_ERR_INVALID_ARG: --host 'not-an-address'" in err, "bad host: %s %r" % (rc, err))

s = Server(sb, ["--api-key", "sekrit", "-a", "kjv", "-ngl", "99", "-t", "1"])
try:
    # the port is taken: exit 1
    rc, out, err = run(["--port", str(s.port)])
    check(rc == 1 and "error: SB_ERR_IO: cannot listen on 127.0.0.1 port %d" % s.port in err, "port in use: %s %r" % (rc, err))
    # -ngl 99: the GPU where there is one, else one warning line and the CPU
    warned = any(line.startswith("sb serve: warning: -ngl 99: no usable GPU") for line in s.err)
    on_cpu = any("on the CPU" in line for line in s.err)
    on_gpu = any("on the GPU (CUDA)" in line for line in s.err)
    check((warned and on_cpu) or (on_gpu and not warned), "-ngl 99: %r" % s.err)
    good = {"Authorization": "Bearer sekrit"}
    for method, path, body in [("GET", "/v1/models", None), ("GET", "/metrics", None), ("POST", "/tokenize", {"content": "x"}),
                               ("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2}),
                               ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "max_tokens": 2})]:
        st, h, b = s.request(method, path, body)
        check(st == 401 and b'"authentication_error"' in b, "%s without a key: %s %r" % (path, st, b))
        st, h, b = s.request(method, path, body, headers={"Authorization": "Bearer wrong"})
        check(st == 401, "%s with a wrong key: %s" % (path, st))
        st, h, b = s.request(method, path, body, headers={"Authorization": "Bearer sekritX"})
        check(st == 401, "%s with a longer key: %s" % (path, st))
        st, h, b = s.request(method, path, body, headers=good)
        check(st == 200, "%s with the key: %s %r" % (path, st, b[:200]))
    st, h, b = s.request("GET", "/health")
    check(st == 200, "/health needs no key: %s" % st)
    st, h, b = s.request("GET", "/v1/models", headers=good)
    check(b'"id":"kjv"' in b, "-a alias: %r" % b)
finally:
    s.stop()

# --no-mmap: the model read into memory; greedy completions equal the mapped model's
req = {"prompt": "In the beginning", "max_tokens": 8, "temperature": 0}
texts = []
for args in (["-t", "1"], ["-t", "1", "--no-mmap"]):
    s = Server(sb, args)
    try:
        st, j = s.post("/v1/completions", req)
        check(st == 200, "%r: completion %s %r" % (args, st, j))
        texts.append(j["choices"][0]["text"] if st == 200 else None)
    finally:
        s.stop()
check(texts[0] is not None and texts[0] == texts[1], "--no-mmap text %r vs mapped %r" % (texts[1:], texts[:1]))
rc, out, err = run(["--help"])
check("--no-mmap" in out, "--help names --no-mmap")
finish()
