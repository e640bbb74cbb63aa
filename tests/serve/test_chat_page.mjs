// SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
// tests/serve/test_chat_page.mjs SB BUILD_DIR — the chat page at / in headless Chromium (Debian's
// `chromium`, driven by the pinned puppeteer-core): the page loads with no request leaving the
// server (no CDN) and no console error; typing a message and pressing Send streams the answer into
// the page, and that answer equals the non-streamed greedy answer to the very request the page sent
// (read from the browser's network events, sent again with stream: false); a second turn carries
// the whole conversation; Stop aborts a long answer and the server cancels the request. A
// screenshot is saved in BUILD_DIR and its path printed.
import { execFileSync } from "node:child_process";
import path from "node:path";
import { check, finish, nodeRequire, postJson, startServer } from "./serve_lib.mjs";

const [sb, buildDir] = process.argv.slice(2);
const puppeteer = nodeRequire(buildDir)("puppeteer-core");

function findChromium() {
  for (const name of ["chromium", "chromium-browser"]) {
    try {
      return execFileSync("sh", ["-c", "command -v " + name], { encoding: "utf8" }).trim();
    } catch (e) { /* next */ }
  }
  console.log("error: chromium is missing: install Debian's chromium (listed in scripts/deps/test.txt; 'make test' installs it)");
  process.exit(1);
}

const server = await startServer(sb, ["-t", "2"]);
const browser = await puppeteer.launch({
  executablePath: findChromium(), headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--disable-extensions"],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 900, height: 700 });
  const foreign = [], consoleErrors = [], chatBodies = [];
  page.on("request", (req) => {
    if (!req.url().startsWith(server.url + "/")) foreign.push(req.url());
    if (req.url().endsWith("/v1/chat/completions")) chatBodies.push(req.postData());
  });
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  const resp = await page.goto(server.url + "/", { waitUntil: "networkidle0" });
  check(resp.status() === 200 && resp.headers()["content-security-policy"].includes("default-src 'self'"), "GET / with its CSP");
  check((await page.title()) === "SonicBoom chat", "page title");
  await page.waitForFunction(() => document.getElementById("model").textContent.endsWith(".gguf"), { timeout: 10000 });

  // greedy, short, so the answer can be compared
  const setField = (id, v) => page.$eval("#" + id, (el, v) => { el.value = v; }, String(v));
  await setField("temperature", 0);
  await setField("max-tokens", 24);
  await page.type("#input", "Who begat Enos?");
  await page.click("#send");
  await page.waitForSelector(".msg.assistant[data-done='1']", { timeout: 60000 });
  const first = await page.$eval(".msg.assistant .text", (el) => el.textContent);
  const finish1 = await page.$eval(".msg.assistant", (el) => el.dataset.finish);
  check(chatBodies.length === 1, "one chat request: " + chatBodies.length);
  const sent = JSON.parse(chatBodies[0]);
  check(sent.stream === true && sent.temperature === 0 && sent.max_tokens === 24 && sent.messages.length === 1, "the page's request: " + chatBodies[0]);
  const plain = await postJson(server.url + "/v1/chat/completions", { ...sent, stream: false });
  const want = plain.body.choices[0].message.content;
  check(first.length > 0 && first === want, `streamed answer in the page ${JSON.stringify(first)} != non-streamed ${JSON.stringify(want)}`);
  check(finish1 === plain.body.choices[0].finish_reason, `finish ${finish1} vs ${plain.body.choices[0].finish_reason}`);

  // a second turn sends the whole conversation
  await page.type("#input", "And who begat Cainan?");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.querySelectorAll(".msg.assistant[data-done='1']").length === 2, { timeout: 60000 });
  const second = JSON.parse(chatBodies[1] || "{}");
  check(second.messages && second.messages.length === 3 && second.messages[1].role === "assistant" && second.messages[1].content === first &&
    second.messages[2].content === "And who begat Cainan?", "the second turn carries the conversation: " + chatBodies[1]);
  const answer2 = await page.$$eval(".msg.assistant .text", (els) => els[1].textContent);
  const plain2 = await postJson(server.url + "/v1/chat/completions", { ...second, stream: false });
  check(answer2 === plain2.body.choices[0].message.content, "second answer != non-streamed");
  const shot = path.join(path.resolve(buildDir), "serve-chat-page.png");
  await page.screenshot({ path: shot });
  console.log("screenshot: " + shot);

  // Stop: the only slot is kept busy by 8 long answers sent from here (~0.4 s each on this model), so
  // the page's request waits in the queue; Stop aborts it, the page says so, the server drops it
  const blockers = Array.from({ length: 8 }, () =>
    postJson(server.url + "/v1/completions", { prompt: "In the beginning", max_tokens: 480, temperature: 0, ignore_eos: true }));
  await new Promise((r) => setTimeout(r, 200));
  await page.click("#reset");
  await page.$eval("#input", (el) => { el.value = "In the beginning"; });
  await page.click("#send");
  await page.waitForFunction(() => document.body.dataset.busy === "1", { timeout: 10000 });
  await new Promise((r) => setTimeout(r, 150));
  await page.click("#stop");
  await page.waitForSelector(".msg.assistant[data-done='1']", { timeout: 10000 });
  check((await page.$eval(".msg.assistant", (el) => el.dataset.finish)) === "aborted", "Stop ends the answer as aborted");
  check((await page.$eval("#send", (el) => el.disabled)) === false, "Send is enabled again after Stop");
  check((await Promise.all(blockers)).every((r) => r.status === 200), "the long requests beside it completed");
  let cancelled = false;
  for (let i = 0; i < 100 && !cancelled; i++) {
    cancelled = server.err.some((l) => l.includes("the client hung up; cancelled"));
    await new Promise((r) => setTimeout(r, 50));
  }
  check(cancelled, "the server cancelled the stopped request: " + server.err.join("\n"));
  check(foreign.length === 0, "requests left the server: " + foreign.join(", "));
  check(consoleErrors.length === 0, "console errors: " + consoleErrors.join(" | "));
} catch (err) {
  check(false, "unexpected exception: " + (err && err.stack));
} finally {
  await browser.close();
  await server.stop();
}
finish();
