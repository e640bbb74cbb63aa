// SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
// tests/serve/test_openai.mjs SB BUILD_DIR — a client nobody here wrote: the official `openai` npm
// package (pinned in tests/serve/node/package-lock.json) against `sb serve --api-key` on loopback
// with the embedded model on the CPU. Each result the package parses is compared with the same
// request sent as raw JSON: chat and completions, plain and streamed (deltas join to the plain text,
// the include_usage chunk), n > 1 (choice 0 = the n = 1 text), stop strings, usage with
// prompt_tokens_details.cached_tokens (a repeated prompt reuses the slot's cache), logprobs, the
// model list, and error objects surfacing as the package's APIError subclasses with the right
// status, type, param and message (400, 401, 404, and 429 from a server whose queue is full).
import { check, finish, nodeRequire, postJson, startServer } from "./serve_lib.mjs";

const [sb, buildDir] = process.argv.slice(2);
const OpenAI = nodeRequire(buildDir)("openai");
const KEY = "sk-test-0123";
const Q = [{ role: "user", content: "Who begat Enos?" }];
const P = "In the beginning";

const server = await startServer(sb, ["-t", "2", "--api-key", KEY]);
const client = new OpenAI({ baseURL: server.url + "/v1", apiKey: KEY, maxRetries: 0, timeout: 120000 });
const raw = (path, body) => postJson(server.url + path, body, { Authorization: "Bearer " + KEY });

async function expectError(promise, Class, status, want, label) {
  try {
    await promise;
    check(false, label + ": no error");
  } catch (e) {
    check(e instanceof OpenAI.APIError && e instanceof Class && e.status === status,
      `${label}: ${e.constructor.name} ${e.status}, expected ${Class.name} ${status}`);
    check(typeof e.message === "string" && e.message.includes(want), `${label}: message ${JSON.stringify(e.message)} lacks ${JSON.stringify(want)}`);
    return e;
  }
}

try {
  // ---- models ----
  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].id === "sonicboom-kjv-13m-q8_0.gguf", "models.list: " + JSON.stringify(models.data));

  // ---- chat: plain = raw JSON; stream joins to it; usage chunk ----
  const chatReq = { model: "sb", messages: Q, max_tokens: 12, temperature: 0, ignore_eos: true };
  const ref = (await raw("/v1/chat/completions", chatReq)).body;
  const chat = await client.chat.completions.create(chatReq);
  const text = chat.choices[0].message.content;
  check(chat.object === "chat.completion" && text === ref.choices[0].message.content && text.length > 0,
    `chat via openai ${JSON.stringify(text)} != raw ${JSON.stringify(ref.choices[0].message.content)}`);
  check(chat.choices[0].finish_reason === "length" && chat.usage.completion_tokens === 12 &&
    chat.usage.total_tokens === chat.usage.prompt_tokens + 12, "chat usage: " + JSON.stringify(chat.usage));
  const stream = await client.chat.completions.create({ ...chatReq, stream: true, stream_options: { include_usage: true } });
  let joined = "", usage = null, finishReason = null, ids = new Set(), chunks = 0;
  for await (const c of stream) {
    chunks++;
    ids.add(c.id);
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      joined += ch.delta.content || "";
      if (ch.finish_reason) finishReason = ch.finish_reason;
    }
  }
  check(joined === text && finishReason === "length" && ids.size === 1 && chunks >= 3, `chat stream ${JSON.stringify(joined)} / ${finishReason} / ${ids.size} ids`);
  check(usage && usage.completion_tokens === 12 && usage.prompt_tokens === chat.usage.prompt_tokens, "stream usage chunk: " + JSON.stringify(usage));

  // ---- cached_tokens: the same prompt again reuses the slot's cache ----
  const again = await client.chat.completions.create(chatReq);
  const cached = again.usage.prompt_tokens_details && again.usage.prompt_tokens_details.cached_tokens;
  check(Number.isInteger(cached) && cached > 0 && cached < again.usage.prompt_tokens, "cached_tokens on a repeat: " + JSON.stringify(again.usage));

  // ---- completions: plain, stream, stop strings ----
  const compReq = { model: "sb", prompt: P, max_tokens: 16, temperature: 0, ignore_eos: true };
  const cref = (await raw("/v1/completions", compReq)).body.choices[0].text;
  const comp = await client.completions.create(compReq);
  check(comp.object === "text_completion" && comp.choices[0].text === cref && cref.length > 0, `completion ${JSON.stringify(comp.choices[0].text)} != raw ${JSON.stringify(cref)}`);
  let cjoined = "";
  for await (const c of await client.completions.create({ ...compReq, stream: true })) cjoined += c.choices.map((x) => x.text).join("");
  check(cjoined === cref, `completion stream ${JSON.stringify(cjoined)} != ${JSON.stringify(cref)}`);
  const words = cref.trim().split(" ");
  const stopAt = " " + words[Math.min(3, words.length - 1)];
  const cut = cref.slice(0, cref.indexOf(stopAt));
  const stopped = await client.completions.create({ ...compReq, stop: [stopAt, "\u2603"] });
  check(stopped.choices[0].text === cut && stopped.choices[0].finish_reason === "stop",
    `stop ${JSON.stringify(stopAt)}: ${JSON.stringify(stopped.choices[0])}, expected ${JSON.stringify(cut)}`);
  let sjoined = "", sfinish = null;
  for await (const c of await client.chat.completions.create({ ...chatReq, stop: text.split(" ")[2], stream: true })) {
    for (const ch of c.choices) {
      sjoined += ch.delta.content || "";
      sfinish = ch.finish_reason || sfinish;
    }
  }
  check(sjoined === text.slice(0, text.indexOf(text.split(" ")[2])) && sfinish === "stop", `streamed chat stop: ${JSON.stringify(sjoined)} ${sfinish}`);

  // ---- n > 1: each choice seeded apart; greedy ones all the n = 1 text ----
  const seeded = { model: "sb", prompt: P, max_tokens: 12, temperature: 1.0, seed: 7 };
  const one = await client.completions.create(seeded);
  const three = await client.completions.create({ ...seeded, n: 3 });
  check(three.choices.length === 3 && three.choices.map((c) => c.index).join() === "0,1,2", "n=3 indices");
  // its choices decode together (continuous batching moves sampled draws, never greedy ones)
  check(one.choices[0].text.length > 0, "n=1 seeded text empty");
  const g1 = await client.completions.create({ ...seeded, temperature: 0 });
  const g3 = await client.completions.create({ ...seeded, temperature: 0, n: 3 });
  check(g3.choices.every((c) => c.text === g1.choices[0].text), "greedy n=3 choices != the n=1 text");
  check(new Set(three.choices.map((c) => c.text)).size > 1, "n=3 choices all equal: " + JSON.stringify(three.choices));
  check(three.usage.completion_tokens === 36, "n=3 usage counts every choice: " + JSON.stringify(three.usage));
  const nchat = await client.chat.completions.create({ ...chatReq, n: 2, temperature: 0.9, seed: 11, stream: true });
  const parts = ["", ""];
  for await (const c of nchat) for (const ch of c.choices) parts[ch.index] += ch.delta.content || "";
  const nplain = await client.chat.completions.create({ ...chatReq, n: 2, temperature: 0.9, seed: 11 });
  check(parts[0] === nplain.choices[0].message.content && parts[1] === nplain.choices[1].message.content, "n=2 stream != plain");

  // ---- logprobs through the package's types ----
  const lp = await client.chat.completions.create({ ...chatReq, logprobs: true, top_logprobs: 2 });
  const content = lp.choices[0].logprobs && lp.choices[0].logprobs.content;
  check(Array.isArray(content) && content.length === 12 && content.map((e) => e.token).join("") === text &&
    content.every((e) => e.logprob <= 0 && e.top_logprobs.length === 2 && e.top_logprobs[0].token === e.token), "chat logprobs: " + JSON.stringify(content && content[0]));
  const clp = await client.completions.create({ ...compReq, logprobs: 1 });
  check(clp.choices[0].logprobs.tokens.join("") === cref && clp.choices[0].logprobs.token_logprobs.length === 16, "completion logprobs");

  // ---- errors: the package's APIError classes with status, type, param, message ----
  let e = await expectError(client.chat.completions.create({ ...chatReq, temperature: 5 }), OpenAI.BadRequestError, 400, "'temperature' must be in", "temperature 5");
  check(e && e.type === "invalid_request_error" && e.param === "temperature", "400 fields: " + JSON.stringify(e && e.error));
  e = await expectError(client.completions.create({ ...compReq, max_tokens: 100000 }), OpenAI.BadRequestError, 400, "more than the context", "context overflow");
  check(e && e.type === "exceed_context_size_error", "exceed_context_size_error type: " + JSON.stringify(e && e.error));
  await expectError(client.chat.completions.create({ ...chatReq, messages: [] }), OpenAI.BadRequestError, 400, "'messages' must hold 1 to", "no messages");
  await expectError(client.chat.completions.create({ ...chatReq, stream: true, logit_bias: { 999999: 1 } }), OpenAI.BadRequestError, 400,
    "must be a token id", "stream with a bad logit_bias: 400 before any byte");
  const wrongKey = new OpenAI({ baseURL: server.url + "/v1", apiKey: "wrong", maxRetries: 0 });
  await expectError(wrongKey.chat.completions.create(chatReq), OpenAI.AuthenticationError, 401, "invalid or missing API key", "wrong key");
  await expectError(client.get("/nowhere"), OpenAI.NotFoundError, 404, "no such endpoint", "unknown path");
  // 429: a server with one slot and a queue of one, both taken by long requests
  const busy = await startServer(sb, ["-t", "1", "--queue-size", "1"]);
  try {
    const long = { prompt: P, max_tokens: 480, temperature: 0, ignore_eos: true };
    // one request at a time: the slot must have taken the first before the second can queue
    const until = async (re) => {
      for (let i = 0; i < 400; i++) {
        if (re.test(await (await fetch(busy.url + "/metrics")).text())) return true;
        await new Promise((r) => setTimeout(r, 5));
      }
      return false;
    };
    const blockers = [postJson(busy.url + "/v1/completions", long)];
    check(await until(/^sonicboom_requests_processing 1$/m), "the slot of the second server did not fill");
    blockers.push(postJson(busy.url + "/v1/completions", long));
    check(await until(/^sonicboom_requests_deferred 1$/m), "the queue of the second server did not fill");
    const busyClient = new OpenAI({ baseURL: busy.url + "/v1", apiKey: "none", maxRetries: 0 });
    const e429 = await expectError(busyClient.completions.create({ prompt: P, max_tokens: 4 }), OpenAI.RateLimitError, 429,
      "the server is busy", "full queue");
    check(e429 && e429.type === "rate_limit_error", "429 type: " + JSON.stringify(e429 && e429.error));
    check((await Promise.all(blockers)).every((r) => r.status === 200), "the requests that filled the queue completed");
  } finally {
    await busy.stop();
  }
} catch (err) {
  check(false, "unexpected exception: " + (err && err.stack));
} finally {
  await server.stop();
}
finish();
