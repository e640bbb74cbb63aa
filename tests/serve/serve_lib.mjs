// SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
// tests/serve/serve_lib.mjs — what the Node tests of `sb serve` share (the Node twin of
// serve_lib.py): the pass/fail counters and their "N passed, N failed" line, loading the pinned npm
// packages from BUILD_DIR/serve-node (node_setup.sh), starting `sb serve --port 0` and waiting for
// /health, stopping it with SIGTERM (exit 0 expected), and a plain JSON POST over fetch.
import { createRequire } from "node:module";
import { spawn } from "node:child_process";
import path from "node:path";

let passed = 0, failed = 0;

export function check(cond, label) {
  if (cond) passed++;
  else {
    failed++;
    console.log("FAIL: " + label);
  }
  return cond;
}

export function finish() {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 && passed > 0 ? 0 : 1);
}

// require() for the packages node_setup.sh installed into BUILD_DIR/serve-node.
export function nodeRequire(buildDir) {
  return createRequire(path.join(path.resolve(buildDir), "serve-node", "package.json"));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// `sb serve --port 0 ARGS`: resolves to {port, url, proc, err: [stderr lines], stop()} once /health is 200.
export async function startServer(sb, args, { timeoutMs = 60000 } = {}) {
  const proc = spawn(sb, ["serve", "--port", "0", ...args], { stdio: ["ignore", "ignore", "pipe"] });
  const err = [];
  let port = null, exited = null, buf = "";
  proc.stderr.setEncoding("utf8");
  proc.stderr.on("data", (d) => {
    buf += d;
    let at;
    while ((at = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, at);
      buf = buf.slice(at + 1);
      err.push(line);
      const m = line.match(/listening on http:\/\/[^ ]*:(\d+)$/);
      if (m) port = Number(m[1]);
    }
  });
  proc.on("exit", (code, sig) => { exited = { code, sig }; });
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && exited === null) {
    if (port !== null) {
      try {
        const r = await fetch(`http://127.0.0.1:${port}/health`);
        if (r.status === 200) break;
      } catch (e) { /* not listening yet */ }
    }
    await sleep(50);
  }
  if (exited !== null || port === null || Date.now() >= deadline) {
    proc.kill("SIGKILL");
    throw new Error("sb serve did not become healthy: " + err.join("\n"));
  }
  const server = { port, url: `http://127.0.0.1:${port}`, proc, err };
  server.stop = async () => {
    proc.kill("SIGTERM");
    for (let i = 0; i < 600 && exited === null; i++) await sleep(50);
    if (exited === null) proc.kill("SIGKILL");
    check(exited && exited.code === 0, `sb serve exit after SIGTERM: ${JSON.stringify(exited)}; stderr: ${err.join("\n")}`);
    check(err.some((l) => l.includes("stopping (SIGTERM)")), "no 'stopping (SIGTERM)' line: " + err.join("\n"));
  };
  return server;
}

// POST a JSON body; resolves to {status, body (parsed JSON, or {_raw: text})}.
export async function postJson(url, body, headers = {}) {
  const r = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json", ...headers }, body: JSON.stringify(body) });
  const text = await r.text();
  try {
    return { status: r.status, body: JSON.parse(text) };
  } catch (e) {
    return { status: r.status, body: { _raw: text } };
  }
}
