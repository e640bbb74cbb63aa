# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""tests/serve/test_nginx.py SB DATA — scale-out: two `sb serve` processes behind nginx (Debian's,
run unprivileged from a temporary directory, listening on a loopback port; no system service), with
the configuration docs/serve.md shows. Through nginx: /health and /metrics answer; 32 concurrent
streaming clients for a few seconds each get replies equal to the same request run alone on one
server directly (SSE passes through unbuffered and whole); both servers took a share (their own
/metrics); with one server stopped, requests through nginx still succeed on the other."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_lib import Server, check, finish  # noqa: E402
from load_lib import reduce, requests_set, same_reply, stream  # noqa: E402

sb = sys.argv[1]
CLIENTS, SECONDS = 32, 6.0

NGINX_CONF = """# docs/serve.md's configuration, with this test's paths and ports
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log {dir}/access.log;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    upstream sonicboom {{
        least_conn;                       # a long generation keeps its server busy: send new ones elsewhere
        server 127.0.0.1:{p1} max_fails=1 fail_timeout=10s;
        server 127.0.0.1:{p2} max_fails=1 fail_timeout=10s;
        keepalive 32;
    }}
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 4m;          # sb serve's own limit
        location / {{
            proxy_pass http://sonicboom;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;          # SSE: pass each event on as it comes
            proxy_read_timeout 600s;
            proxy_next_upstream error timeout http_503;
        }}
    }}
}}
"""


def find_nginx():
    for d in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/sbin", "/sbin"]:
        p = os.path.join(d, "nginx")
        if os.access(p, os.X_OK):
            return p
    print("error: nginx is missing: install Debian's nginx (listed in scripts/deps/test.txt; 'make test' installs it)")
    sys.exit(1)


def free_port():
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


nginx = find_nginx()
tmp = tempfile.mkdtemp(prefix="sb-nginx-")
a = Server(sb, ["--parallel", "2", "-t", "1", "--queue-size", "64"])
b = Server(sb, ["--parallel", "2", "-t", "1", "--queue-size", "64"])
proc = None
try:
    port = free_port()
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(dir=tmp, p1=a.port, p2=b.port, port=port))
    t = subprocess.run([nginx, "-t", "-e", os.path.join(tmp, "error.log"), "-p", tmp, "-c", conf], capture_output=True, text=True)
    check(t.returncode == 0, "nginx -t: %s" % t.stderr)
    proc = subprocess.Popen([nginx, "-e", os.path.join(tmp, "error.log"), "-p", tmp, "-c", conf],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    up = False
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            up = True
            break
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
    if not check(up, "nginx did not start: %s" % (proc.stderr.read() if proc.poll() is not None else "no listener")):
        raise SystemExit
    via = Server.__new__(Server)  # a Server object that only sends requests (to nginx's port)
    via.port = port
    st, h, body = via.request("GET", "/health")
    check(st == 200 and body == b'{"status":"ok"}', "/health through nginx: %s %r" % (st, body))
    st, h, body = via.request("GET", "/metrics")
    check(st == 200 and b"sonicboom_requests_total" in body, "/metrics through nginx: %s" % st)

    reqs = requests_set()
    refs = [reduce(*stream(a.port, p, q), p)[0] for p, q in reqs]
    check(all(refs), "references")
    ma0, mb0 = a.metrics(), b.metrics()
    lock = threading.Lock()
    counts = {"sent": 0, "ok": 0}
    failures, ids = [], set()
    stop_at = time.time() + SECONDS

    def client(k):
        i = k
        while time.time() < stop_at:
            p, q = reqs[i % len(reqs)]
            try:
                summary, rid, why = reduce(*stream(port, p, q), p)
            except OSError as e:
                summary, rid, why = None, None, str(e)
            with lock:
                counts["sent"] += 1
                if summary is None or rid in ids or not same_reply(summary, refs[i % len(reqs)], q):
                    failures.append("client %d request %d: %s" % (k, i % len(reqs), why or ("id reused" if rid in ids else "differs")))
                else:
                    counts["ok"] += 1
                ids.add(rid)
            i += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(SECONDS + 300)
    for f in failures[:10]:
        print(f)
    check(not failures and counts["ok"] == counts["sent"] and counts["ok"] >= CLIENTS,
          "through nginx: %d of %d replies right, %d failures" % (counts["ok"], counts["sent"], len(failures)))
    da = a.metrics()["sonicboom_requests_total"] - ma0["sonicboom_requests_total"]
    db = b.metrics()["sonicboom_requests_total"] - mb0["sonicboom_requests_total"]
    check(da + db == counts["sent"] and da > 0 and db > 0, "the two servers served %d + %d of %d" % (da, db, counts["sent"]))
    print("nginx: %d clients, %d replies: %d on one server, %d on the other" % (CLIENTS, counts["ok"], da, db))

    # ---- one server gone: nginx sends everything to the other ----
    b.stop()
    for k in range(6):
        p, q = reqs[k]
        summary, rid, why = reduce(*stream(port, p, q), p)
        check(same_reply(summary, refs[k], q), "with one server stopped, request %d through nginx: %s" % (k, why))
finally:
    if proc and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    if proc:
        check(proc.returncode == 0, "nginx exit status %s" % proc.returncode)
    a.stop()
    if b.proc.poll() is None:
        b.stop()
    shutil.rmtree(tmp, ignore_errors=True)
finish()
