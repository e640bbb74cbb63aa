// SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
// tools/serve/web/chat.js — the chat page's logic: keeps the conversation (messages[]), sends it to
// /v1/chat/completions with stream: true, reads the SSE reply through fetch's body stream (an
// EventSource cannot POST), appends each delta as it comes, and Stop aborts the fetch (the server
// cancels the request when the connection closes). A finished answer's element gets data-done="1"
// and data-finish (the finish_reason, or "aborted" / "error"), which the test waits on.
"use strict";

const $ = (id) => document.getElementById(id);
const messages = []; // the conversation: {role, content}
let controller = null; // the fetch in flight

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  const label = document.createElement("span");
  label.className = "role";
  label.textContent = role;
  const body = document.createElement("span");
  body.className = "text";
  body.textContent = text;
  div.append(label, body);
  $("log").append(div);
  div.scrollIntoView({ block: "end" });
  return body;
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").disabled = !busy;
  document.body.dataset.busy = busy ? "1" : "0";
}

// Split SSE text into complete events; returns the unparsed rest.
function takeEvents(buffer, onData) {
  let at;
  while ((at = buffer.indexOf("\n\n")) >= 0) {
    const event = buffer.slice(0, at);
    buffer = buffer.slice(at + 2);
    for (const line of event.split("\n"))
      if (line.startsWith("data: ")) onData(line.slice(6));
  }
  return buffer;
}

async function errorText(resp) {
  try {
    const j = await resp.json();
    return (j.error && j.error.message) || JSON.stringify(j);
  } catch (e) {
    return resp.status + " " + resp.statusText;
  }
}

async function send(text) {
  messages.push({ role: "user", content: text });
  addMessage("user", text);
  const out = addMessage("assistant", "");
  const box = out.parentElement;
  const sys = $("system").value.trim();
  const body = {
    messages: (sys ? [{ role: "system", content: sys }] : []).concat(messages),
    stream: true,
    temperature: Number($("temperature").value),
    max_tokens: Number($("max-tokens").value),
  };
  controller = new AbortController();
  setBusy(true);
  $("status").textContent = "…";
  let answer = "", finish = null;
  try {
    const resp = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), body: JSON.stringify(body), signal: controller.signal,
    });
    if (!resp.ok) throw new Error(await errorText(resp));
    const reader = resp.body.getReader(), decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer = takeEvents(buffer + decoder.decode(value, { stream: true }), (data) => {
        if (data === "[DONE]") return;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message);
        const c = chunk.choices && chunk.choices[0];
        if (!c) return;
        if (c.delta && c.delta.content) {
          answer += c.delta.content;
          out.textContent = answer;
          box.scrollIntoView({ block: "end" });
        }
        if (c.finish_reason) finish = c.finish_reason;
      });
    }
    $("status").textContent = finish ? "finished: " + finish : "the stream ended without a finish_reason";
    if (!finish) finish = "error";
  } catch (e) {
    if (e.name === "AbortError") {
      finish = "aborted";
      $("status").textContent = "stopped";
    } else {
      finish = "error";
      box.classList.add("error");
      out.textContent = answer + (answer ? "\n" : "") + "error: " + e.message;
      $("status").textContent = "error";
    }
  }
  if (answer) messages.push({ role: "assistant", content: answer });
  else if (finish === "error" || finish === "aborted") messages.pop(); // nothing came: the turn is not kept
  box.dataset.finish = finish;
  box.dataset.done = "1";
  controller = null;
  setBusy(false);
}

$("form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("input").value;
  if (!text.trim() || controller) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) {
    ev.preventDefault();
    $("form").requestSubmit();
  }
});
$("stop").addEventListener("click", () => controller && controller.abort());
$("reset").addEventListener("click", () => {
  if (controller) controller.abort();
  messages.length = 0;
  $("log").replaceChildren();
  $("status").textContent = "";
});

setBusy(false);
fetch("/v1/models", { headers: headers() })
  .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
  .then((j) => { $("model").textContent = j.data[0].id; })
  .catch(() => { $("model").textContent = "(model list needs the API key)"; });
