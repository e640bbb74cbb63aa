# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""tests/serve/test_load.py SB DATA [SECONDS] — the bounded load test of `sb serve` on the embedded
model on the CPU: 64 concurrent streaming clients for SECONDS (60) against 4 slots, each client
sending the requests of load_lib.requests_set() in turn. Every reply must be complete and its own
(200, SSE framing with [DONE] last, one id per reply never seen in another one, each choice
finished once) and equal to the reference: the same request run alone before the load, with the
same seed (load_lib.same_reply: greedy replies identical — text of every choice, finish_reason,
usage —, seeded ones identical in shape: continuous batching may move their draws).
Nothing may be dropped (every request sent gets its reply; no 429 with a queue sized for the
clients), and /metrics must count exactly the replies the clients got."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_lib import Server, check, finish  # noqa: E402
from load_lib import reduce, requests_set, same_reply, stream  # noqa: E402

sb = sys.argv[1]
SECONDS = float(sys.argv[3]) if len(sys.argv) > 3 else 60.0
CLIENTS = 64

reqs = requests_set()
s = Server(sb, ["--parallel", "4", "-t", "1", "--queue-size", "128"])
try:
    # ---- references: each request alone ----
    refs = []
    for path, body in reqs:
        summary, rid, why = reduce(*stream(s.port, path, body), path)
        check(summary is not None, "reference %s %r: %s" % (path, body, why))
        refs.append(summary)
    keys = [repr(r["texts"]) for r in refs if r]
    check(len(set(keys)) == len(reqs), "the requests' replies are not all distinct: a swap could go unseen")
    m0 = s.metrics()

    # ---- the load ----
    lock = threading.Lock()
    seen_ids, failures = set(), []
    counts = {"sent": 0, "ok": 0}
    stop_at = time.time() + SECONDS

    def client(k):
        i = k
        while time.time() < stop_at:
            path, body = reqs[i % len(reqs)]
            with lock:
                counts["sent"] += 1
            try:
                summary, rid, why = reduce(*stream(s.port, path, body), path)
            except OSError as e:
                summary, rid, why = None, None, "connection: %s" % e
            with lock:
                if summary is None:
                    failures.append("client %d request %d: %s" % (k, i % len(reqs), why))
                elif rid in seen_ids:
                    failures.append("client %d request %d: id %s was already used by another reply" % (k, i % len(reqs), rid))
                elif not same_reply(summary, refs[i % len(reqs)], body):
                    failures.append("client %d request %d: %r != alone %r" % (k, i % len(reqs), summary, refs[i % len(reqs)]))
                else:
                    counts["ok"] += 1
                seen_ids.add(rid)
            i += 1

    t0 = time.time()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(SECONDS + 300)
    elapsed = time.time() - t0
    check(not any(t.is_alive() for t in threads), "a client never got its last reply")
    for f in failures[:10]:
        print(f)
    check(not failures, "%d of %d replies were wrong, mixed up, dropped or truncated" % (len(failures), counts["sent"]))
    check(counts["ok"] == counts["sent"] and counts["ok"] >= 2 * CLIENTS,
          "%d of %d replies right (at least %d expected)" % (counts["ok"], counts["sent"], 2 * CLIENTS))
    m1 = s.metrics()
    d = {k: m1.get(k, 0) - m0.get(k, 0) for k in m1}
    check(d.get("sonicboom_requests_total") == counts["sent"], "metrics count %r requests, the clients got %d" %
          (d.get("sonicboom_requests_total"), counts["sent"]))
    check(d.get("sonicboom_requests_failed_total") == 0 and d.get("sonicboom_requests_rejected_total") == 0 and
          d.get("sonicboom_requests_cancelled_total") == 0, "failed / rejected / cancelled: %r" % d)
    print("load: %d clients, %.0f s, %d replies (%.1f/s), %d tokens predicted" %
          (CLIENTS, elapsed, counts["ok"], counts["ok"] / elapsed, d.get("sonicboom_tokens_predicted_total", 0)))
finally:
    s.stop()
finish()
