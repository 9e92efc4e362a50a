// threadline web page: threads, live run timelines over SSE, approvals, resume and cancel.
//
// Plain ES modules, no build step, no dependencies (stream.js: streamed text, compaction notes).
// Everything the page shows comes from the HTTP API: it polls `POST /threads/search`, joins each
// run's stream with `EventSource` on `GET /threads/{t}/runs/{r}/stream` (reconnects send
// Last-Event-ID by themselves) and drops any event it already has, keyed by run id + sequence
// number. Runs stream `messages-tuple` too: the agent's text grows in its step as it is written.

import { Bubbles, aiMessageOf, compactionNote } from "./stream.js";

const POLL_MS = 2000;
const ACTIVE = new Set(["pending", "running"]);
const STREAM_MODES = ["updates", "custom", "messages-tuple"];
const FOLD_CHARS = 160;
const FOLD_LINES = 3;

/** Used only when the server has no `GET /tasks` (older servers). */
const BUILTIN_TASKS = [
  {
    name: "counter",
    title: "Count to n, one slow tool call per line",
    params: {
      n: { type: "integer", default: 5, minimum: 1, maximum: 500, description: "How many lines to append." },
      delay: { type: "number", default: 0.5, minimum: 0, maximum: 60, description: "Seconds each append takes." },
    },
  },
  { name: "fix_test", title: "Fix a failing unit test", params: {} },
  {
    name: "greet",
    title: "Write a greeting (asks for approval)",
    params: { name: { type: "string", default: "world", minLength: 1, maxLength: 100, description: "Who to greet." } },
  },
];
const FREE_TEXT = "__free_text__";

// ---------------------------------------------------------------------------------------------
// small helpers

const $ = (sel, root = document) => root.querySelector(sel);

/** Create an element: h("p", {class: "x", onclick: fn}, "text", child). Text is never HTML. */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

class ApiError extends Error {
  constructor(message, status, data) {
    super(message);
    this.status = status;
    this.data = data;
  }
}

function detailOf(data) {
  if (!data) return "";
  if (typeof data === "string") return data;
  const d = data.detail;
  if (typeof d === "string") return d;
  if (Array.isArray(d)) return d.map((e) => `${(e.loc || []).join(".")}: ${e.msg}`).join("; ");
  return d ? JSON.stringify(d) : "";
}

// ---------------------------------------------------------------------------------------------
// the API key, when the server needs one (THREADLINE_AUTH=keys, or a custom auth module)

const KEY_STORE = "threadline_key";

/** Keep the key for this tab's session; a cookie carries it on EventSource requests too (they
 * cannot set headers). SameSite=Strict: no other site's page sends it. */
function rememberKey(key) {
  sessionStorage.setItem(KEY_STORE, key);
  document.cookie = `${KEY_STORE}=${encodeURIComponent(key)}; path=/; SameSite=Strict`;
}

function forgetKey() {
  sessionStorage.removeItem(KEY_STORE);
  document.cookie = `${KEY_STORE}=; path=/; SameSite=Strict; max-age=0`;
}

const storedKey = sessionStorage.getItem(KEY_STORE);
if (storedKey) rememberKey(storedKey);
else forgetKey();

let asking = null;

/** Show the key dialog once, however many requests are waiting for it. */
function askForKey(message) {
  if (!asking) {
    asking = new Promise((resolve) => {
      const dialog = $("#key-dialog");
      $("#key-error").textContent = message || "";
      $("#key-form").onsubmit = (ev) => {
        ev.preventDefault();
        const key = $("#key-input").value.trim();
        if (!key) return;
        rememberKey(key);
        dialog.close();
        asking = null;
        resolve();
      };
      dialog.showModal();
      $("#key-input").focus();
    });
  }
  return asking;
}

async function api(path, { method = "GET", body } = {}) {
  let res;
  // A 401 asks for a key (once for every waiting request) and tries again, until one works.
  for (;;) {
    const key = sessionStorage.getItem(KEY_STORE);
    const headers = body === undefined ? {} : { "content-type": "application/json" };
    if (key) headers["x-api-key"] = key;
    try {
      res = await fetch(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      throw new ApiError(`the server is unreachable (${err.message})`, 0, null);
    }
    if (res.status !== 401) break;
    if (key && key === sessionStorage.getItem(KEY_STORE)) forgetKey();
    await askForKey(key ? "That key was refused; check it and try again." : "");
  }
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  if (!res.ok) throw new ApiError(detailOf(data) || `${res.status} ${res.statusText}`, res.status, data);
  return data;
}

const short = (id) => String(id || "").slice(0, 8);

function json(value, pretty = false) {
  try {
    return pretty ? JSON.stringify(value, null, 2) : JSON.stringify(value);
  } catch {
    return String(value);
  }
}

/** An approval request of the built-in agent (LangChain's human-in-the-loop format): one
 * action request per call of an agent step that asks, with the ids of those calls. */
function isApproval(value) {
  return Boolean(
    value &&
      Array.isArray(value.action_requests) &&
      value.action_requests.length &&
      Array.isArray(value.tool_call_ids) &&
      value.tool_call_ids.length === value.action_requests.length,
  );
}

/** The calls an approval request asks about, in the model's order: id, tool, arguments, why. */
function approvalCalls(value) {
  if (!isApproval(value)) return [];
  return value.action_requests.map((a, i) => {
    const r = a && typeof a === "object" ? a : {};
    return { id: value.tool_call_ids[i], name: r.name, args: r.args, description: r.description };
  });
}

/** The decisions of an approval answer, {"decisions": [{"type": ...}, ...]}: one per call. */
function decisionsOf(answer) {
  const ds = answer && Array.isArray(answer.decisions) ? answer.decisions : [];
  return ds.map((d) => (d && typeof d === "object" ? d : {}));
}

const DECIDED = { approve: "approved", edit: "approved with edited arguments", reject: "rejected" };

/** "approved", "rejected (“why”)": what a decision did, in words. */
function decisionWords(d) {
  const word = DECIDED[d.type] || "answered";
  return `${word}${d.message ? ` (“${d.message}”)` : ""}`;
}

function ago(iso) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return "";
  const s = Math.max(0, Math.round((Date.now() - t) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(t).toLocaleDateString();
}

function fmtSeconds(s) {
  if (typeof s !== "number") return "";
  return s < 1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(s < 10 ? 2 : 1)} s`;
}

/** Text shown in full when short, folded in <details> when long. */
function foldable(text, summary, cls = "") {
  const s = String(text ?? "");
  const lines = s.split("\n").length;
  if (s.length <= FOLD_CHARS && lines <= FOLD_LINES) return h("pre", { class: `out ${cls}` }, s);
  const first = (s.split("\n").find((l) => /[A-Za-z0-9]/.test(l)) || "").slice(0, 80);
  return h(
    "details",
    { class: `fold ${cls}` },
    h("summary", {}, `${summary} (${lines} lines, ${s.length} chars)`, first ? h("span", { class: "peek" }, ` — ${first}`) : null),
    h("pre", { class: "out" }, s),
  );
}

function messageText(m) {
  const c = m && m.content;
  if (typeof c === "string") return c;
  if (Array.isArray(c)) return c.map((p) => (typeof p === "string" ? p : p.text || "")).join("");
  return c ? json(c) : "";
}

/** A catalog task's instruction ends with a machine marker line; users need not see it. */
const stripMarker = (s) => String(s).replace(/\n*\(threadline task: [a-z_]+ \{.*?\}\)\s*$/s, "");

// ---------------------------------------------------------------------------------------------
// thread status

function isDied(thread) {
  const r = thread && thread.last_run;
  if (!r) return false;
  if (r.lease_expired) return true;
  return r.status === "error" && /attempt/i.test(r.error || "");
}

function statusLabel(thread) {
  if (isDied(thread)) return "died — resumable";
  return thread.status;
}

function statusClass(thread) {
  return isDied(thread) ? "died" : thread.status;
}

function threadTitle(t) {
  const md = t.metadata || {};
  if (md.title) return String(md.title);
  const v = t.values || {};
  if (v.task && v.task.name && v.task.name !== "freeform") return taskLabel(v.task.name, v.task.params);
  const first = (v.messages || []).find((m) => m.type === "human");
  if (first) return `“${stripMarker(messageText(first)).slice(0, 60)}”`;
  return `thread ${short(t.thread_id)}`;
}

function taskLabel(name, params) {
  const p = Object.entries(params || {})
    .map(([k, v]) => `${k}=${typeof v === "string" ? JSON.stringify(v) : v}`)
    .join(", ");
  return p ? `${name} (${p})` : name;
}

function runInputLabel(run) {
  const kw = (run && run.kwargs) || {};
  const input = kw.input;
  const command = kw.command;
  if (command && command.resume !== undefined) {
    const answers = Object.values(command.resume && typeof command.resume === "object" ? command.resume : { x: command.resume });
    const words = answers.flatMap((a) => {
      const ds = decisionsOf(a);
      return ds.length ? ds.map((d) => d.type || "answer") : ["answer"];
    });
    return `decision: ${words.join(", ")}`;
  }
  if (input === null || input === undefined) return "resume from last checkpoint";
  if (input.task) return `task ${taskLabel(input.task.name, input.task.params)}`;
  if (Array.isArray(input.messages) && input.messages.length) {
    const m = input.messages[input.messages.length - 1];
    return `message “${String(m.content || "").slice(0, 80)}”`;
  }
  return "input " + json(input).slice(0, 80);
}

// ---------------------------------------------------------------------------------------------
// connection indicator and banner

const conn = {
  set(stateName, text) {
    const el = $("#conn");
    if (el.dataset.state === stateName && $("#conn-text").textContent === text) return;
    el.dataset.state = stateName;
    $("#conn-text").textContent = text;
  },
};

function banner(text) {
  const el = $("#banner");
  if (!text) {
    el.hidden = true;
    el.textContent = "";
  } else {
    el.hidden = false;
    el.textContent = text;
  }
}

// ---------------------------------------------------------------------------------------------
// one run's stream and timeline section

class RunSection {
  constructor(view, run, order) {
    this.view = view;
    this.run = run;
    this.id = run.run_id;
    this.order = order;
    this.seen = new Set(); // `${run_id}:${seq}` of every event applied
    this.entries = new Map(); // semantic key (step:N, tool:<call id>, verify:N, end) → <li>
    this.finished = false; // saw `end`
    this.es = null;
    this.connState = "idle"; // idle | connecting | live | reconnecting | ended
    this.reopenTimer = null;
    this.waiters = [];
    this.replay = !ACTIVE.has(run.status);
    this.lastStep = 0;
    this.bubbles = new Bubbles(); // AI message id → its text in the timeline, as it streams

    this.badge = h("span", { class: `badge run-${run.status}` }, run.status);
    this.attemptBadge = h("span", { class: "badge attempt", hidden: true });
    this.list = h("ol", { class: "entries" });
    this.el = h(
      "section",
      { class: "run", dataset: { runId: this.id }, "aria-label": `Run ${short(this.id)}` },
      h(
        "header",
        { class: "run-head" },
        h("h3", {}, `Run ${short(this.id)}`),
        this.badge,
        this.attemptBadge,
        h("span", { class: "run-input" }, runInputLabel(run)),
        run.created_at ? h("time", { datetime: run.created_at, class: "muted" }, new Date(run.created_at).toLocaleTimeString()) : null,
      ),
      this.list,
    );
  }

  setStatus(status) {
    this.run.status = status;
    this.badge.textContent = status;
    this.badge.className = `badge run-${status}`;
  }

  url() {
    const q = STREAM_MODES.map((m) => `stream_mode=${encodeURIComponent(m)}`).join("&");
    return `/threads/${encodeURIComponent(this.run.thread_id)}/runs/${encodeURIComponent(this.id)}/stream?${q}`;
  }

  /** Open (or re-open) the EventSource; resolves `done()` on `end`. */
  open() {
    if (this.finished || this.es) return;
    clearTimeout(this.reopenTimer);
    const es = new EventSource(this.url());
    this.es = es;
    this.setConn(this.connState === "reconnecting" ? "reconnecting" : "connecting");
    es.onopen = () => this.setConn("live");
    es.onerror = (e) => {
      if (e && typeof e.data === "string") return; // an `event: error` frame, handled below
      if (this.finished) return;
      if (es.readyState === EventSource.CONNECTING) {
        this.setConn("reconnecting");
      } else if (es.readyState === EventSource.CLOSED) {
        // The browser gave up (an HTTP error, say from a proxy): open a new EventSource. It
        // starts from the first event; what we already have is dropped by sequence number.
        es.close();
        this.es = null;
        this.setConn("reconnecting");
        this.reopenTimer = setTimeout(() => this.open(), 2000);
      }
    };
    for (const name of ["metadata", "updates", "custom", "error", "end", "values", "messages"]) {
      es.addEventListener(name, (e) => {
        if (typeof e.data !== "string") return; // connection error events carry no data
        this.receive(name, e.lastEventId, e.data);
      });
    }
  }

  done() {
    if (this.finished) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  close() {
    clearTimeout(this.reopenTimer);
    if (this.es) this.es.close();
    this.es = null;
  }

  setConn(s) {
    this.connState = s;
    this.view.updateConn();
  }

  receive(name, id, raw) {
    const key = `${this.id}:${id}`;
    if (id !== "" && this.seen.has(key)) return; // a duplicate after a reconnect
    if (id !== "") this.seen.add(key);
    let data;
    try {
      data = JSON.parse(raw);
    } catch {
      data = raw;
    }
    try {
      this.apply(name, data, id);
    } catch (err) {
      console.error("threadline: could not show event", name, data, err);
    }
  }

  // -- timeline entries ----------------------------------------------------------------------

  entry(key, kind, build, before = null) {
    let li = key ? this.entries.get(key) : null;
    if (!li) {
      li = h("li", { class: `ev ev-${kind}`, dataset: { kind } });
      build(li);
      this.list.insertBefore(li, before && before.parentNode === this.list ? before : null);
      if (key) this.entries.set(key, li);
    }
    return li;
  }

  note(kind, label, ...body) {
    return this.entry(null, kind, (li) => li.append(h("div", { class: "ev-line" }, h("span", { class: "tag" }, label), ...body)));
  }

  stepEntry(step) {
    return this.entry(`step:${step}`, "step", (li) => {
      li.dataset.step = step;
      li.append(
        h("div", { class: "ev-line" }, h("span", { class: "tag" }, `Step ${step}`), h("span", { class: "who" }, "agent"), h("span", { class: "meta" })),
        h("p", { class: "say", hidden: true }),
      );
    });
  }

  toolEntry(callId, tool) {
    return this.entry(`tool:${callId}`, "tool", (li) => {
      li.dataset.state = "running";
      li.dataset.toolCallId = callId;
      li.append(
        h(
          "div",
          { class: "ev-line" },
          h("span", { class: "tag" }, "Tool"),
          h("code", { class: "tool-name" }, tool || "?"),
          h("span", { class: "args-inline" }),
          h("span", { class: "state" }, "running…"),
          h("span", { class: "meta duration" }),
        ),
        h("div", { class: "args" }),
        h("div", { class: "result" }),
      );
    });
  }

  setToolArgs(li, args) {
    const text = json(args);
    const inline = $(".args-inline", li);
    const box = $(".args", li);
    li.dataset.args = text;
    if (text.length <= 90) {
      inline.replaceChildren(h("code", { class: "args-code" }, text));
      box.replaceChildren();
    } else {
      inline.replaceChildren();
      box.replaceChildren(foldable(json(args, true), "arguments", "args-pre"));
    }
  }

  finishTool(li, { ok, duration, output, again }) {
    if (li.dataset.state !== "running" && again) {
      li.dataset.runs = String(Number(li.dataset.runs || "1") + 1);
      $(".meta.duration", li).textContent += " · ran again after a takeover";
      return;
    }
    li.dataset.state = ok ? "ok" : "error";
    $(".state", li).textContent = ok ? "✓ ok" : "✗ error";
    const note = li.dataset.restarted ? "re-run after the takeover" : "";
    const took = typeof duration === "number" ? fmtSeconds(duration) : "";
    $(".meta.duration", li).textContent = [took, note].filter(Boolean).join(" · ");
    $(".result", li).replaceChildren(foldable(output ?? "", "result", ok ? "" : "bad"));
  }

  apply(name, data, id) {
    switch (name) {
      case "metadata":
        return this.onMetadata(data);
      case "custom":
        return this.onCustom(data);
      case "updates":
        return this.onUpdates(data);
      case "error":
        this.note("error", "Error", h("span", { class: "bad" }, `${data.error || "error"}: ${data.message || json(data)}`));
        return;
      case "end":
        return this.onEnd(data);
      case "messages":
        return this.onMessage(data);
      default:
        return; // values: not shown
    }
  }

  onMetadata(data) {
    const attempt = Number(data.attempt || 1);
    this.run.attempt = attempt;
    if (attempt > 1) {
      this.attemptBadge.hidden = false;
      this.attemptBadge.textContent = `attempt ${attempt}`;
      this.entry(`attempt:${attempt}`, "resumed", (li) =>
        li.append(h("div", { class: "ev-line" }, h("span", { class: "tag" }, "Takeover"), `resumed after a crash (attempt ${attempt})`)),
      );
    }
    if (!this.finished && !this.replay) this.setStatus("running");
    this.view.counter(this, { attempt });
  }

  /** The step's text for an AI message id: one bubble, created by its first chunk or by the
   * final message, whichever comes first. */
  say(step, id) {
    const li = this.stepEntry(step);
    if (!id) return $(".say", li);
    return this.bubbles.claim(li, id, this.run.attempt || 1, () => h("p", { class: "say", hidden: true }));
  }

  /** A `messages-tuple` event: an AI message's text grows in its step as chunks come. */
  onMessage(data) {
    const m = aiMessageOf(data);
    if (!m) return; // tool results, the task's message: shown from updates
    let say = this.bubbles.get(m.id);
    if (!say && m.type !== "ai" && !m.content) return; // tool-call or usage chunks: no text yet
    say = say || this.say(this.lastStep, m.id);
    this.bubbles.stream(say, m);
  }

  onCustom(d) {
    if (!d || typeof d !== "object") return;
    switch (d.type) {
      case "context_compacted": {
        this.entry(null, "compacted", (li) => li.append(...compactionNote(h, d).filter(Boolean)));
        return;
      }
      case "step": {
        this.lastStep = d.step;
        this.stepEntry(d.step);
        this.view.counter(this, { step: d.step });
        return;
      }
      case "step_finished": {
        const li = this.stepEntry(d.step);
        const n = (d.tool_calls || []).length;
        $(".meta", li).textContent = `${n ? `${n} tool call${n > 1 ? "s" : ""}` : "no tool calls"} · ${d.tokens ?? 0} tokens`;
        return;
      }
      case "budget": {
        this.view.counter(this, { left: d.left });
        if (d.exceeded) this.note("budget", "Budget", h("span", { class: "bad" }, `budget exceeded: ${d.exceeded}`));
        return;
      }
      case "tool_started": {
        const li = this.toolEntry(d.tool_call_id, d.tool);
        const attempt = String(this.run.attempt || 1);
        if (li.dataset.attempt && li.dataset.attempt !== attempt && li.dataset.state === "running") {
          li.dataset.restarted = "true";
          $(".state", li).textContent = `running again (attempt ${attempt})…`;
        }
        li.dataset.attempt = attempt;
        this.setToolArgs(li, d.args);
        return;
      }
      case "tool_finished": {
        const li = this.toolEntry(d.tool_call_id, d.tool);
        this.finishTool(li, { ok: d.ok, duration: d.duration, output: d.output, again: true });
        return;
      }
      case "verify": {
        const li = this.entry(`verify:${d.attempt ?? "x"}`, "verify", () => {});
        li.replaceChildren();
        const passed = d.passed;
        li.dataset.passed = String(passed);
        li.dataset.status = d.status || "";
        const verdict = passed === true ? "✓ check passed" : passed === false ? "✗ check failed" : "no acceptance check";
        const next =
          d.status === "running" ? " — the failure goes back to the agent" : d.status ? ` — status: ${d.status}` : "";
        li.append(
          h("div", { class: "ev-line" }, h("span", { class: "tag" }, "Verify"), h("span", { class: passed === false ? "bad" : passed ? "good" : "" }, verdict), next, d.attempt ? h("span", { class: "meta" }, `attempt ${d.attempt}`) : null),
        );
        if (d.output || d.detail) li.append(foldable(d.output || d.detail, "check output"));
        this.view.setVerdict(this, d);
        return;
      }
      default:
        this.note("progress", "Progress", h("code", {}, json(d)));
    }
  }

  onUpdates(data) {
    if (!data || typeof data !== "object") return;
    for (const [node, upd] of Object.entries(data)) {
      if (node === "__interrupt__") {
        for (const intr of upd || []) {
          const calls = approvalCalls(intr.value);
          const names = calls.map((c) => c.name || "tool call");
          this.entry(`interrupt:${intr.id}`, "interrupt", (li) => {
            li.dataset.interruptId = intr.id;
            li.dataset.tools = json(names);
            const waiting = calls.length > 1 ? `— waiting for ${calls.length} decisions` : "— waiting for a decision";
            li.append(
              h("div", { class: "ev-line" }, h("span", { class: "tag" }, "Approval"), h("code", {}, names.join(", ") || "tool call"), h("span", { class: "ask" }, waiting)),
            );
            this.view.showAnswer(li);
          });
          for (const c of calls) this.view.proposed.set(c.id, c.args);
          this.view.interruptSeen(this, intr);
        }
        continue;
      }
      if (node === "__metadata__") continue;
      if (!upd || typeof upd !== "object") continue;
      const messages = Array.isArray(upd.messages) ? upd.messages : [];
      if (node === "agent" || messages.some((m) => m.type === "ai")) {
        for (const m of messages) {
          if (m.type === "human") {
            // The task's instruction: shown before the step that answered it.
            const stepLi = this.entries.get(`step:${upd.step ?? this.lastStep}`);
            this.entry(`human:${m.id}`, "human", (li) => li.append(h("div", { class: "ev-line" }, h("span", { class: "tag" }, "Task"), h("span", { class: "say" }, stripMarker(messageText(m))))), stepLi);
          } else if (m.type === "ai") {
            // The final message replaces what streamed under its id (no second copy).
            const say = this.bubbles.get(m.id) || this.say(upd.step ?? this.lastStep ?? 0, m.id);
            this.bubbles.finish(say, messageText(m));
          }
        }
        if (upd.usage) this.view.counter(this, { tokens: upd.usage.tokens, step: upd.usage.steps });
        continue;
      }
      if (node === "tools" || messages.some((m) => m.type === "tool")) {
        for (const m of messages) {
          if (m.type !== "tool") continue;
          const li = this.toolEntry(m.tool_call_id, m.name);
          if (li.dataset.state === "running") {
            // A call without tool_finished: rejected, denied or refused before it ran.
            const started = Boolean(li.dataset.args);
            const proposed = this.view.proposed.get(m.tool_call_id);
            if (!started && proposed !== undefined) this.setToolArgs(li, proposed);
            const ok = m.status !== "error";
            this.finishTool(li, { ok, duration: started ? (m.additional_kwargs || {}).duration : undefined, output: messageText(m) });
            if (!started) $(".state", li).textContent = ok ? "✓ ok" : "✗ not run";
          }
        }
        continue;
      }
      if (node === "verify") continue; // shown from the `verify` progress event
      this.note("update", node, foldable(json(upd, true), "update"));
    }
  }

  /** A run that stopped without an interrupt: the run's `error` says why (e.g. cancelled). */
  async explainStop() {
    try {
      const run = await api(`/threads/${encodeURIComponent(this.run.thread_id)}/runs/${encodeURIComponent(this.id)}`);
      const final = this.entries.get("end");
      if (run.error && final) $(".final", final).textContent = `run interrupted · ${run.error}`;
    } catch {
      /* keep the generic label */
    }
  }

  onEnd(data) {
    const status = data.status || "?";
    this.finished = true;
    this.setStatus(status);
    for (const li of this.list.querySelectorAll(".ev-tool[data-state=running]")) {
      li.dataset.state = "lost";
      $(".state", li).textContent = "did not finish in this run";
    }
    const verdict = this.view.verdicts.get(this.id);
    let detail = verdict && verdict.status ? ` · task ${verdict.status}` : "";
    // A run that paused at an interrupt ends `success` (as on LangGraph Server); its thread waits.
    const paused = this.list.querySelector(".ev-interrupt");
    if (paused && (status === "success" || status === "interrupted")) detail = " · paused for approval";
    else if (status === "interrupted") detail = " · stopped";
    this.entry("end", "end", (li) => {
      li.dataset.status = status;
      const taskBad = verdict && ["failed", "stuck", "budget_exceeded"].includes(verdict.status);
      li.dataset.task = (verdict && verdict.status) || "";
      // Paused: shown as waiting (the run's status is `success`, the thread's `interrupted`).
      const look = taskBad ? "error" : paused ? "interrupted" : status;
      li.append(h("div", { class: "ev-line" }, h("span", { class: "tag" }, "End"), h("strong", { class: `final run-${look}` }, `run ${status}${detail}`)));
    });
    if (status === "interrupted" && !paused) this.explainStop();
    this.close();
    this.setConn("ended");
    for (const w of this.waiters.splice(0)) w();
    this.view.runEnded(this);
  }
}

// ---------------------------------------------------------------------------------------------
// the selected thread

class ThreadView {
  constructor(threadId) {
    this.threadId = threadId;
    this.runs = new Map();
    this.verdicts = new Map();
    this.cards = new Map(); // interrupt id → card element
    this.decided = new Set(); // interrupt ids this page answered
    this.answers = new Map(); // interrupt id → the answer a later run carried
    this.proposed = new Map(); // tool call id → arguments an approval request proposed
    this.thread = null;
    this.destroyed = false;
    this.counterOwner = -1;
    this.stateBusy = false;
    this.ready = false; // runs listed: from now on an unknown last run is discovered
  }

  async load() {
    $("#empty-view").hidden = true;
    $("#view").hidden = false;
    $("#timeline").replaceChildren();
    $("#approvals").replaceChildren();
    $("#view-error").textContent = "";
    $("#view-id").textContent = this.threadId;
    $("#workspace-link").href = `/threads/${encodeURIComponent(this.threadId)}/workspace`;
    for (const id of ["c-step", "c-tokens", "c-budget", "c-attempt"]) $(`#${id}`).textContent = "–";
    const known = app.threads.find((t) => t.thread_id === this.threadId);
    if (known) this.updateThread(known);
    else $("#view-title").textContent = `thread ${short(this.threadId)}`;
    let runs;
    try {
      const [thread, list] = await Promise.all([
        api(`/threads/${encodeURIComponent(this.threadId)}`),
        api(`/threads/${encodeURIComponent(this.threadId)}/runs?limit=100`),
      ]);
      if (this.destroyed) return;
      this.updateThread(thread);
      runs = list.reverse();
    } catch (err) {
      $("#view-error").textContent = `Could not load the thread: ${err.message}`;
      return;
    }
    for (const r of runs) this.addRun(r, { open: false });
    this.ready = true;
    // Live runs first, then replay the finished ones one at a time (few connections at once).
    for (const sec of this.runs.values()) if (!sec.replay) sec.open();
    for (const sec of this.runs.values()) {
      if (!sec.replay || sec.finished) continue;
      sec.open();
      await Promise.race([sec.done(), new Promise((r) => setTimeout(r, 5000))]);
      if (this.destroyed) return;
    }
    this.refreshApprovals();
  }

  destroy() {
    this.destroyed = true;
    for (const sec of this.runs.values()) sec.close();
  }

  addRun(run, { open = true } = {}) {
    if (this.runs.has(run.run_id)) return this.runs.get(run.run_id);
    const sec = new RunSection(this, run, this.runs.size);
    this.runs.set(run.run_id, sec);
    this.noteAnswers(run);
    // Keep sections in creation order.
    const tl = $("#timeline");
    const later = [...tl.children].find((el) => {
      const other = this.runs.get(el.dataset.runId);
      return other && other.run.created_at && run.created_at && other.run.created_at > run.created_at;
    });
    tl.insertBefore(sec.el, later || null);
    if (open) sec.open();
    return sec;
  }

  /** Remember the answers a run carries (command.resume keyed by interrupt id) and show them. */
  noteAnswers(run) {
    const resume = run.kwargs && run.kwargs.command && run.kwargs.command.resume;
    if (!resume || typeof resume !== "object") return;
    for (const [id, answer] of Object.entries(resume)) {
      this.answers.set(id, answer);
      for (const li of document.querySelectorAll(`.ev-interrupt[data-interrupt-id="${CSS.escape(id)}"]`)) this.showAnswer(li);
    }
  }

  showAnswer(li) {
    const a = this.answers.get(li.dataset.interruptId);
    if (!a) return;
    const ds = decisionsOf(a);
    li.dataset.decision = ds.map((d) => d.type || "").join(",");
    if (ds.length <= 1) {
      $(".ask", li).textContent = `— ${decisionWords(ds[0] || {})}`;
      return;
    }
    // Several calls: what each one's decision was, in their order.
    let names = [];
    try {
      names = JSON.parse(li.dataset.tools || "[]");
    } catch {
      /* numbered instead */
    }
    $(".ask", li).textContent = `— ${ds.map((d, i) => `${names[i] || `call ${i + 1}`} ${decisionWords(d)}`).join(", ")}`;
  }

  latestRun() {
    let best = null;
    for (const sec of this.runs.values()) if (!best || sec.order > best.order) best = sec;
    return best;
  }

  // -- header, counters, connection -------------------------------------------------------------

  updateThread(thread) {
    this.thread = thread;
    $("#view-title").textContent = threadTitle(thread);
    const badge = $("#view-status");
    badge.textContent = statusLabel(thread);
    badge.className = `badge status-${statusClass(thread)}`;
    const last = thread.last_run;
    const active = last && ACTIVE.has(last.status);
    const died = isDied(thread);
    $("#cancel-btn").hidden = !active;
    // A run whose lease expired is taken over by any live worker; resuming is for runs that ended.
    $("#resume-btn").hidden = !(thread.status === "error" && !active);
    let hint = "";
    if (died && last.lease_expired) hint = "Its worker stopped renewing the lease; a live server takes the run over.";
    else if (died) hint = `The run died: ${last.error || ""}`;
    else if (thread.status === "error" && last && last.error) hint = `Last run failed: ${last.error}`;
    else if (thread.status === "interrupted") hint = "Waiting for your decision below.";
    $("#view-hint").textContent = hint;
    if (last && !this.runs.has(last.run_id) && this.ready) this.discoverRuns();
    if (thread.status === "interrupted" || this.cards.size) this.refreshApprovals();
  }

  /** A run started elsewhere (another tab, the API, a decision): add it and follow it. */
  async discoverRuns() {
    if (this.discovering) return;
    this.discovering = true;
    try {
      const list = await api(`/threads/${encodeURIComponent(this.threadId)}/runs?limit=20`);
      if (this.destroyed) return;
      for (const r of list.reverse()) if (!this.runs.has(r.run_id)) this.addRun(r, { open: true });
    } catch {
      /* next poll tries again */
    } finally {
      this.discovering = false;
    }
  }

  counter(sec, { step, tokens, left, attempt }) {
    if (sec.order < this.counterOwner) return; // an older run's replay: the newest run owns them
    this.counterOwner = sec.order;
    if (step !== undefined) $("#c-step").textContent = String(step);
    if (tokens !== undefined) $("#c-tokens").textContent = Number(tokens).toLocaleString("en");
    if (attempt !== undefined) $("#c-attempt").textContent = String(attempt);
    if (left) {
      const parts = [];
      if (left.steps !== undefined) parts.push(`${left.steps} steps`);
      if (left.tokens !== undefined) parts.push(`${Number(left.tokens).toLocaleString("en")} tokens`);
      if (left.seconds !== undefined) parts.push(`${Math.round(left.seconds)} s`);
      $("#c-budget").textContent = parts.join(" · ");
    }
  }

  setVerdict(sec, d) {
    this.verdicts.set(sec.id, d);
  }

  updateConn() {
    if (this.destroyed) return;
    const secs = [...this.runs.values()];
    if (secs.some((s) => s.connState === "reconnecting")) return conn.set("reconnecting", "reconnecting…");
    if (secs.some((s) => !s.replay && !s.finished && s.connState === "live")) return conn.set("live", "live");
    if (secs.some((s) => !s.replay && !s.finished && s.connState === "connecting")) return conn.set("connecting", "connecting…");
    conn.set("idle", "not streaming");
  }

  runEnded(sec) {
    if (sec.replay) return;
    app.pollSoon();
    this.refreshApprovals();
  }

  // -- approvals -----------------------------------------------------------------------------

  interruptSeen(sec, intr) {
    // Only the newest run can still be waiting; the state check below is the truth.
    if (sec !== this.latestRun() || this.decided.has(intr.id)) return;
    this.showCard(intr);
    this.refreshApprovals();
  }

  async refreshApprovals() {
    if (this.stateBusy || this.destroyed) return;
    this.stateBusy = true;
    try {
      const state = await api(`/threads/${encodeURIComponent(this.threadId)}/state`);
      if (this.destroyed) return;
      const pending = (state.interrupts || []).filter((i) => i && isApproval(i.value));
      const ids = new Set(pending.map((i) => i.id));
      for (const [id, card] of this.cards) {
        if (!ids.has(id)) {
          card.remove();
          this.cards.delete(id);
        }
      }
      for (const i of pending) if (!this.decided.has(i.id)) this.showCard(i);
      // Interrupts that are not approvals (other graphs): show them, answerable through the API.
      for (const i of (state.interrupts || []).filter((x) => !(x && isApproval(x.value)))) {
        if (!this.cards.has(i.id)) {
          const card = h("article", { class: "card approval other", dataset: { interruptId: i.id } }, h("h3", {}, "The graph is waiting for input"), foldable(json(i.value, true), "value"), h("p", { class: "hint" }, "Answer it through the API with command.resume."));
          this.cards.set(i.id, card);
          $("#approvals").append(card);
        }
      }
    } catch (err) {
      if (err.status === 404) return;
    } finally {
      this.stateBusy = false;
    }
  }

  /** One card per approval request: a block per call it asks about (tool, arguments, why, and
   * approve / edit / reject), answered with one decision per call, in their order. A request for
   * one call is answered by its button; for several, each call's choice is kept until "Send". */
  showCard(intr) {
    if (this.cards.has(intr.id)) return;
    const calls = approvalCalls(intr.value);
    const several = calls.length > 1;
    const uid = `ap-${intr.id}`;
    const err = h("p", { class: "error", role: "alert" });
    const chosen = calls.map(() => null); // several calls: the decision picked for each
    const progress = h("span", { class: "hint", "aria-live": "polite" });
    const sendBtn = h("button", { type: "button", class: "primary", "data-act": "send", disabled: true }, `Send ${calls.length} decisions`);
    const buttons = () => card.querySelectorAll("button");
    const toggle = (form, btn, show) => {
      form.hidden = !show;
      btn.setAttribute("aria-expanded", String(show));
      if (show) (form.querySelector("textarea, input") || form).focus();
      else btn.focus();
    };
    const blocks = calls.map((call, i) => this.approvalBlock(call, several ? i : null, several ? `${uid}-${i}` : uid, toggle, (decision, errorEl) => {
      if (!several) return send([decision], errorEl);
      chosen[i] = decision;
      blocks[i].show(decision);
      update();
    }));
    const update = () => {
      const left = chosen.filter((d) => !d).length;
      sendBtn.disabled = left > 0;
      progress.textContent = left ? `${calls.length - left} of ${calls.length} decided` : "all decided";
    };
    const send = async (decisions, errorEl) => {
      for (const b of blocks) b.clearErrors();
      err.textContent = "";
      for (const b of buttons()) b.disabled = true;
      try {
        const run = await api(`/threads/${encodeURIComponent(this.threadId)}/approvals`, {
          method: "POST",
          body: { interrupt_id: intr.id, decisions, stream_mode: STREAM_MODES },
        });
        this.decided.add(intr.id);
        card.remove();
        this.cards.delete(intr.id);
        if (!this.destroyed) this.addRun(run, { open: true });
        app.pollSoon();
        $("#timeline").lastElementChild?.scrollIntoView({ block: "nearest" });
      } catch (e) {
        for (const b of buttons()) b.disabled = false;
        const text = e.status === 409 ? `${e.message} (refreshing…)` : e.message;
        // The server names the decision it refused ("decision 2 (write_file): ..."): say it
        // there, and let that call be decided again.
        const which = several && e.status === 422 ? /\bdecision (\d+) \(/.exec(e.message) : null;
        const at = which ? Number(which[1]) - 1 : -1;
        if (at >= 0 && at < blocks.length) {
          chosen[at] = null;
          blocks[at].refused(decisions[at], text);
        } else {
          errorEl.textContent = text;
        }
        if (several) update();
        if (e.status === 409) setTimeout(() => this.refreshApprovals(), 600);
      }
    };
    sendBtn.addEventListener("click", () => {
      if (chosen.every(Boolean)) send(chosen.slice(), err);
    });
    const card = h(
      "article",
      { class: `card approval${several ? " several" : ""}`, dataset: { interruptId: intr.id }, "aria-labelledby": `${uid}-h` },
      several
        ? h("h3", { id: `${uid}-h` }, `Approve ${calls.length} calls?`)
        : h("h3", { id: `${uid}-h` }, "Approve ", h("code", {}, (calls[0] && calls[0].name) || "tool call"), "?"),
      several ? h("p", { class: "hint" }, "The agent made these calls together: decide each one, then send the decisions.") : null,
      ...blocks.map((b) => b.el),
      several ? h("div", { class: "row send-row" }, sendBtn, progress) : null,
      err,
    );
    if (several) update();
    this.cards.set(intr.id, card);
    $("#approvals").append(card);
  }

  /** The block of one asked call: what it is, and its approve / edit / reject controls.
   * `index`: its place among several calls (null: the only one). `decide(decision, errorEl)`
   * gets the call's decision in LangChain's format. */
  approvalBlock(call, index, uid, toggle, decide) {
    const several = index !== null; // one of several calls: numbered, its choice kept
    const err = h("p", { class: "error", role: "alert" });
    const editErr = h("p", { class: "error", role: "alert", id: `${uid}-edit-err` });
    const argsText = h("textarea", { id: `${uid}-args`, rows: 6, spellcheck: "false", "aria-describedby": `${uid}-edit-err` });
    argsText.value = json(call.args ?? {}, true);
    const msg = h("input", { id: `${uid}-msg`, type: "text", placeholder: "Why not? (sent to the agent)" });
    const editForm = h(
      "form",
      { class: "edit-form", hidden: true },
      h("label", { for: `${uid}-args` }, "Arguments (JSON)"),
      argsText,
      editErr,
      h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Approve with these arguments"), h("button", { type: "button", onclick: () => toggle(editForm, editBtn, false) }, "Close")),
    );
    const rejectForm = h(
      "form",
      { class: "reject-form", hidden: true },
      h("label", { for: `${uid}-msg` }, "Message for the agent"),
      msg,
      h("div", { class: "row" }, h("button", { type: "submit", class: "danger" }, "Reject the call"), h("button", { type: "button", onclick: () => toggle(rejectForm, rejectBtn, false) }, "Close")),
    );
    const approveBtn = h("button", { type: "button", class: "primary", "data-act": "approve" }, "Approve");
    const editBtn = h("button", { type: "button", "data-act": "edit", "aria-expanded": "false", "aria-controls": `${uid}-edit` }, "Edit…");
    const rejectBtn = h("button", { type: "button", class: "danger", "data-act": "reject", "aria-expanded": "false", "aria-controls": `${uid}-reject` }, "Reject…");
    editForm.id = `${uid}-edit`;
    rejectForm.id = `${uid}-reject`;
    const choice = h("p", { class: "choice", "aria-live": "polite" });
    const head = several
      ? h("h4", { id: `${uid}-h` }, `${index + 1}. `, h("code", {}, call.name || "tool call"))
      : null;
    const el = h(
      several ? "section" : "div",
      { class: "call", dataset: { toolCallId: call.id || "", tool: call.name || "" }, "aria-labelledby": several ? `${uid}-h` : undefined },
      head,
      call.description ? h("p", { class: "hint" }, call.description) : null,
      h("pre", { class: "out args-pre" }, json(call.args ?? {}, true)),
      h("div", { class: "row" }, approveBtn, editBtn, rejectBtn),
      editForm,
      rejectForm,
      several ? choice : null,
      err,
    );
    const close = (form, btn) => {
      form.hidden = true;
      btn.setAttribute("aria-expanded", "false");
    };
    /** One of several calls decided: its forms close (the choice shows instead). */
    const settle = () => {
      if (!several) return;
      close(editForm, editBtn);
      close(rejectForm, rejectBtn);
      err.textContent = "";
      editErr.textContent = "";
      argsText.removeAttribute("aria-invalid");
    };
    approveBtn.addEventListener("click", () => {
      settle();
      decide({ type: "approve" }, err);
    });
    editBtn.addEventListener("click", () => toggle(editForm, editBtn, editForm.hidden));
    rejectBtn.addEventListener("click", () => toggle(rejectForm, rejectBtn, rejectForm.hidden));
    argsText.addEventListener("input", () => {
      argsText.removeAttribute("aria-invalid");
      editErr.textContent = "";
    });
    editForm.addEventListener("submit", (e) => {
      e.preventDefault();
      let args;
      try {
        args = JSON.parse(argsText.value);
      } catch (x) {
        argsText.setAttribute("aria-invalid", "true");
        editErr.textContent = `Not valid JSON: ${x.message}`;
        argsText.focus();
        return;
      }
      if (!args || typeof args !== "object" || Array.isArray(args)) {
        argsText.setAttribute("aria-invalid", "true");
        editErr.textContent = "The arguments must be a JSON object, like {\"path\": \"…\"}.";
        argsText.focus();
        return;
      }
      settle();
      // An edit runs the same tool with these arguments (LangChain's edited_action).
      decide({ type: "edit", edited_action: { name: call.name, args } }, editErr);
    });
    rejectForm.addEventListener("submit", (e) => {
      e.preventDefault();
      settle();
      decide({ type: "reject", message: msg.value.trim() || "rejected from the web page" }, err);
    });
    return {
      el,
      /** Several calls: show the decision picked for this one. */
      show(decision) {
        el.dataset.choice = decision ? decision.type : "";
        approveBtn.setAttribute("aria-pressed", String(Boolean(decision && decision.type === "approve")));
        choice.textContent = decision ? `Will be ${decisionWords(decision)}.` : "";
      },
      /** The server refused this call's decision: say why where it was made. */
      refused(decision, text) {
        this.show(null);
        if (decision && decision.type === "edit") {
          editErr.textContent = text;
          argsText.setAttribute("aria-invalid", "true");
          toggle(editForm, editBtn, true);
        } else {
          err.textContent = text;
        }
      },
      clearErrors() {
        err.textContent = "";
        editErr.textContent = "";
      },
    };
  }

  // -- actions -------------------------------------------------------------------------------

  async resume() {
    const btn = $("#resume-btn");
    btn.disabled = true;
    $("#view-error").textContent = "";
    try {
      const run = await api(`/threads/${encodeURIComponent(this.threadId)}/runs`, {
        method: "POST",
        body: { assistant_id: await assistantOf(this.thread, this), input: null, stream_mode: STREAM_MODES },
      });
      this.addRun(run, { open: true });
      btn.hidden = true;
      app.pollSoon();
    } catch (err) {
      $("#view-error").textContent = `Could not resume: ${err.message}`;
    } finally {
      btn.disabled = false;
    }
  }

  async cancel() {
    const last = this.thread && this.thread.last_run;
    if (!last) return;
    const btn = $("#cancel-btn");
    btn.disabled = true;
    $("#view-error").textContent = "";
    try {
      await api(`/threads/${encodeURIComponent(this.threadId)}/runs/${encodeURIComponent(last.run_id)}/cancel`, { method: "POST" });
      app.pollSoon();
    } catch (err) {
      $("#view-error").textContent = `Could not cancel: ${err.message}`;
    } finally {
      btn.disabled = false;
    }
  }
}

async function assistantOf(thread, view) {
  const sec = view && view.latestRun();
  if (sec && sec.run.assistant_id) return sec.run.assistant_id;
  return "agent";
}

// ---------------------------------------------------------------------------------------------
// app: header, form, thread list, selection

const app = {
  info: null,
  tasks: [],
  threads: [],
  view: null,
  pollTimer: null,
  items: new Map(), // thread id → <li>

  async init() {
    $("#new-task").addEventListener("submit", (e) => {
      e.preventDefault();
      this.start();
    });
    $("#task-kind").addEventListener("change", () => this.renderParams());
    $("#assistant").addEventListener("change", () => this.renderTaskMenu());
    $("#resume-btn").addEventListener("click", () => this.view && this.view.resume());
    $("#cancel-btn").addEventListener("click", () => this.view && this.view.cancel());
    window.addEventListener("hashchange", () => this.route());
    await Promise.all([this.loadInfo(), this.loadTasks()]);
    this.renderTaskMenu();
    await this.poll();
    this.route();
  },

  async loadInfo() {
    try {
      this.info = await api("/info");
      $("#model").textContent = `model: ${this.info.model}`;
      $("#model").title = `threadline ${this.info.version} · database ${this.info.database} · LangGraph ${this.info.langgraph}`;
      const assistants = this.info.assistants || ["agent"];
      const sel = $("#assistant");
      sel.replaceChildren(...assistants.map((a) => h("option", { value: a, selected: a === "agent" }, a)));
      $("#assistant-field").hidden = assistants.length < 2;
    } catch (err) {
      $("#model").textContent = "model: unknown (no /info)";
    }
  },

  async loadTasks() {
    try {
      const tasks = await api("/tasks");
      this.tasks = Array.isArray(tasks) ? tasks : BUILTIN_TASKS;
    } catch (err) {
      this.tasks = BUILTIN_TASKS; // a server without GET /tasks
    }
  },

  renderTaskMenu() {
    const sel = $("#task-kind");
    const previous = sel.value;
    const builtin = $("#assistant").value === "agent" || $("#assistant-field").hidden;
    const options = [];
    if (builtin) {
      options.push(h("optgroup", { label: "Demo tasks" }, ...this.tasks.map((t) => h("option", { value: t.name }, t.name))));
    }
    options.push(h("option", { value: FREE_TEXT }, "Free text…"));
    sel.replaceChildren(...options);
    if ([...sel.options].some((o) => o.value === previous)) sel.value = previous;
    this.renderParams();
  },

  renderParams() {
    const name = $("#task-kind").value;
    const box = $("#task-params");
    box.replaceChildren();
    const free = name === FREE_TEXT;
    $("#free-text-field").hidden = !free;
    const task = this.tasks.find((t) => t.name === name);
    $("#task-hint").textContent = free ? "Sent to the agent as a user message." : task ? task.title || "" : "";
    if (!task) return;
    for (const [pname, spec] of Object.entries(task.params || {})) {
      const id = `param-${pname}`;
      const type = spec.type || "string";
      let input;
      if (type === "boolean") {
        input = h("input", { id, name: pname, type: "checkbox", checked: !!spec.default, "data-type": type });
      } else {
        const num = type === "integer" || type === "number";
        input = h("input", {
          id,
          name: pname,
          type: num ? "number" : "text",
          step: type === "integer" ? "1" : num ? "any" : undefined,
          min: spec.minimum,
          max: spec.maximum,
          minlength: spec.minLength,
          maxlength: spec.maxLength,
          inputmode: num ? (type === "integer" ? "numeric" : "decimal") : undefined,
          "data-type": type,
          "aria-describedby": spec.description ? `${id}-desc` : undefined,
        });
        input.value = spec.default ?? "";
      }
      box.append(
        h(
          "div",
          { class: `field ${type === "boolean" ? "check" : ""}` },
          h("label", { for: id }, spec.title || pname),
          input,
          spec.description ? h("p", { class: "hint", id: `${id}-desc` }, spec.description) : null,
        ),
      );
    }
  },

  readParams() {
    const params = {};
    for (const input of $("#task-params").querySelectorAll("input")) {
      const type = input.dataset.type;
      if (type === "boolean") {
        params[input.name] = input.checked;
        continue;
      }
      if (input.value === "") continue; // the server's default
      if (!input.checkValidity()) throw new Error(`${input.name}: ${input.validationMessage}`);
      if (type === "integer" || type === "number") {
        const n = Number(input.value);
        if (!Number.isFinite(n) || (type === "integer" && !Number.isInteger(n))) throw new Error(`${input.name} must be ${type === "integer" ? "a whole number" : "a number"}`);
        params[input.name] = n;
      } else {
        params[input.name] = input.value;
      }
    }
    return params;
  },

  async start() {
    const err = $("#form-error");
    err.textContent = "";
    const kind = $("#task-kind").value;
    const assistant = $("#assistant-field").hidden ? "agent" : $("#assistant").value;
    let input;
    let title;
    try {
      if (kind === FREE_TEXT) {
        const text = $("#free-text").value.trim();
        if (!text) throw new Error("Write an instruction first.");
        input = { messages: [{ role: "user", content: text }] };
        title = `“${text.slice(0, 60)}”`;
      } else {
        const params = this.readParams();
        input = { task: { name: kind, params } };
        title = taskLabel(kind, params);
      }
    } catch (e) {
      err.textContent = e.message;
      return;
    }
    const btn = $("#start-btn");
    btn.disabled = true;
    try {
      const thread = await api("/threads", { method: "POST", body: { metadata: { title, source: "web" } } });
      const run = await api(`/threads/${encodeURIComponent(thread.thread_id)}/runs`, {
        method: "POST",
        body: { assistant_id: assistant, input, stream_mode: STREAM_MODES },
      });
      this.pending = { threadId: thread.thread_id, run };
      location.hash = `#/thread/${thread.thread_id}`;
      await this.poll();
    } catch (e) {
      err.textContent = `Could not start: ${e.message}`;
    } finally {
      btn.disabled = false;
    }
  },

  route() {
    const m = /^#\/thread\/(.+)$/.exec(location.hash);
    const id = m ? decodeURIComponent(m[1]) : null;
    if (this.view && this.view.threadId === id) return;
    if (this.view) this.view.destroy();
    this.view = null;
    for (const [tid, li] of this.items) $("button", li).setAttribute("aria-current", String(tid === id));
    if (!id) {
      $("#view").hidden = true;
      $("#empty-view").hidden = false;
      conn.set("idle", "not streaming");
      return;
    }
    this.view = new ThreadView(id);
    if (this.pending && this.pending.threadId === id) {
      // Just created: show its run at once instead of waiting for the list.
      const { run } = this.pending;
      this.pending = null;
      this.view.load();
      this.view.addRun(run, { open: true });
    } else {
      this.view.load();
    }
    if (window.matchMedia("(max-width: 760px)").matches) $("#thread-view").scrollIntoView({ block: "start" });
  },

  pollSoon() {
    clearTimeout(this.soonTimer);
    this.soonTimer = setTimeout(() => this.poll(), 150);
  },

  async poll() {
    clearTimeout(this.pollTimer);
    try {
      const threads = await api("/threads/search", { method: "POST", body: { limit: 50 } });
      banner("");
      this.threads = threads;
      this.renderThreads();
      if (this.view) {
        const t = threads.find((x) => x.thread_id === this.view.threadId);
        if (t) this.view.updateThread(t);
      }
    } catch (err) {
      if (err.status === 0) banner("The server is unreachable — retrying…");
      else banner(`Could not list threads: ${err.message}`);
    } finally {
      this.pollTimer = setTimeout(() => this.poll(), POLL_MS);
    }
  },

  renderThreads() {
    const ul = $("#threads");
    $("#threads-empty").hidden = this.threads.length > 0;
    const selected = this.view && this.view.threadId;
    const ids = new Set(this.threads.map((t) => t.thread_id));
    for (const [id, li] of this.items) {
      if (!ids.has(id)) {
        li.remove();
        this.items.delete(id);
      }
    }
    this.threads.forEach((t, i) => {
      let li = this.items.get(t.thread_id);
      if (!li) {
        const btn = h(
          "button",
          { type: "button", class: "thread", onclick: () => (location.hash = `#/thread/${t.thread_id}`) },
          h("span", { class: "t-title" }),
          h("span", { class: "badge" }),
          h("span", { class: "t-meta" }),
        );
        li = h("li", { dataset: { threadId: t.thread_id } }, btn);
        this.items.set(t.thread_id, li);
      }
      const btn = $("button", li);
      const title = threadTitle(t);
      const label = statusLabel(t);
      if ($(".t-title", li).textContent !== title) $(".t-title", li).textContent = title;
      const badge = $(".badge", li);
      if (badge.textContent !== label) badge.textContent = label;
      badge.className = `badge status-${statusClass(t)}`;
      li.dataset.status = statusClass(t);
      $(".t-meta", li).textContent = `${ago(t.created_at)} · ${short(t.thread_id)}`;
      btn.setAttribute("aria-current", String(t.thread_id === selected));
      btn.setAttribute("aria-label", `${title}, ${label}`);
      if (ul.children[i] !== li) ul.insertBefore(li, ul.children[i] || null);
    });
  },
};

app.init();
