# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""tests/serve/serve_lib.py — what the `sb serve` tests share (Python stdlib only): start a server
on a free port (--port 0; the port is read from its "listening on" line) with the embedded model,
wait for /health, plain and raw-socket requests, an SSE parser, the Prometheus text parser, and
the pass/fail counters whose "N passed, N failed" line CI reads."""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

PASS = 0
FAIL = 0


def check(cond, label):
    global PASS, FAIL
    if cond:
        PASS += 1
    else:
        FAIL += 1
        print("FAIL: " + label, flush=True)
    return cond


def finish():
    print("%d passed, %d failed" % (PASS, FAIL))
    sys.exit(0 if FAIL == 0 and PASS > 0 else 1)


class Server:
    """`sb serve ARGS --port 0`; stderr collected in self.err (a list of lines)."""

    def __init__(self, sb, args, ready=True, timeout=60):
        self.proc = subprocess.Popen([sb, "serve", "--port", "0"] + list(args), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.err = []
        self.port = None
        got_port = threading.Event()

        def reader():
            for line in self.proc.stderr:
                self.err.append(line)
                if "listening on http://" in line:
                    self.port = int(line.rsplit(":", 1)[1])
                    got_port.set()
            got_port.set()

        self.thread = threading.Thread(target=reader, daemon=True)
        self.thread.start()
        got_port.wait(timeout)
        if self.port is None:
            raise RuntimeError("sb serve did not start: " + "".join(self.err))
        if ready:
            deadline = time.time() + timeout
            while time.time() < deadline:
                try:
                    if self.request("GET", "/health")[0] == 200:
                        return
                except OSError:
                    pass
                time.sleep(0.05)
            raise RuntimeError("sb serve never became healthy: " + "".join(self.err))

    def request(self, method, path, body=None, headers=None, raw=None, timeout=120):
        """(status, headers dict (lower-case names), body bytes); body: an object sent as JSON."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        h = {"Content-Type": "application/json"} if data is not None else {}
        h.update(headers or {})
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        out = (r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
        c.close()
        return out

    def post(self, path, body, **kw):
        st, h, b = self.request("POST", path, body, **kw)
        try:
            return st, json.loads(b)
        except ValueError:
            return st, {"_raw": b.decode(errors="replace")}

    def raw_socket(self, path, body, headers=""):
        """Send a POST on a raw socket and return it unread (the test closes it to hang up)."""
        s = socket.create_connection(("127.0.0.1", self.port))
        data = json.dumps(body).encode()
        s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n"
                   % (path, len(data), headers)).encode() + data)
        return s

    def metrics(self):
        st, h, b = self.request("GET", "/metrics")
        return parse_metrics(b.decode())

    def wait_metric(self, name, pred, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = self.metrics()
            if pred(m.get(name)):
                return True
            time.sleep(0.02)
        return False

    def stop(self):
        """SIGTERM; the server must stop cleanly: exit 0 and its "stopping" line."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = "hung"
        self.thread.join(5)
        check(rc == 0, "server exit status after SIGTERM: %s; stderr: %s" % (rc, "".join(self.err)))
        check(any("stopping (SIGTERM)" in line for line in self.err), "no 'stopping' line: " + "".join(self.err))


def parse_metrics(text):
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


def parse_sse(raw):
    """SSE bytes -> (list of JSON objects, saw [DONE] last, every event well-formed)."""
    text = raw.decode()
    events = [e for e in text.split("\n\n") if e != ""]
    objs, done, well = [], False, text.endswith("\n\n")
    for i, e in enumerate(events):
        if not e.startswith("data: ") or "\n" in e:
            well = False
            continue
        payload = e[len("data: "):]
        if payload == "[DONE]":
            done = i == len(events) - 1
            continue
        try:
            objs.append(json.loads(payload))
        except ValueError:
            well = False
    return objs, done, well


def sb_run(sb, args):
    """stdout of `sb run ARGS` (greedy reference), without its final newline."""
    p = subprocess.run([sb, "run"] + args, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError("sb run failed: " + p.stderr)
    return p.stdout[:-1] if p.stdout.endswith("\n") else p.stdout
