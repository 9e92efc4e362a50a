// LangChain's JavaScript SDK (@langchain/langgraph-sdk, pinned in package.json) against a real
// threadline server at THREADLINE_URL: threads, streams in every mode useStream asks for,
// joinStream with lastEventId, and the approval flow. tests/api/test_js_sdk.py starts the server
// and runs this file with `node --test`.
import assert from "node:assert/strict";
import { test } from "node:test";
import { apiUrl, client, clientWith, sdkVersion } from "./client.mjs";
const COUNTER = { task: { name: "counter", params: { n: 3, delay: 0 } } };
const GREET = { task: { name: "greet", params: { name: "Ada" } } };
const NOTES = { task: { name: "notes", params: {} } };

async function collect(stream) {
  const parts = [];
  for await (const part of stream) parts.push(part);
  return parts;
}

test("threads: create, get, search, update, delete", async () => {
  const thread = await client.threads.create({ metadata: { suite: "js" } });
  assert.match(thread.thread_id, /^[0-9a-f-]{36}$/);
  const got = await client.threads.get(thread.thread_id);
  assert.equal(got.thread_id, thread.thread_id);
  assert.equal(got.status, "idle");
  const found = await client.threads.search({ metadata: { suite: "js" }, limit: 100 });
  assert.ok(found.some((t) => t.thread_id === thread.thread_id));
  const patched = await client.threads.update(thread.thread_id, { metadata: { tag: "x" } });
  assert.equal(patched.metadata.tag, "x");
  await client.threads.delete(thread.thread_id);
  await assert.rejects(client.threads.get(thread.thread_id), (err) => err.status === 404);
});

test("a stream in values, updates, custom and messages-tuple modes ends with the run's end", async () => {
  const thread = await client.threads.create();
  let runId = null;
  const parts = await collect(
    client.runs.stream(thread.thread_id, "agent", {
      input: COUNTER,
      streamMode: ["values", "updates", "custom", "messages-tuple"],
      onRunCreated: (meta) => {
        runId = meta.run_id;
      },
    }),
  );
  const events = parts.map((p) => p.event);
  assert.equal(events[0], "metadata");
  for (const mode of ["values", "updates", "custom"]) assert.ok(events.includes(mode), `${mode} in ${events}`);
  assert.ok(events.some((e) => e.startsWith("messages")), `a messages event in ${events}`);
  assert.equal(parts.at(-1).event, "end");
  assert.equal(parts.at(-1).data.status, "success");
  assert.ok(runId, "onRunCreated saw the run id (Content-Location)");
  const updates = parts.filter((p) => p.event === "updates").map((p) => Object.keys(p.data)[0]);
  assert.deepEqual([...new Set(updates)].sort(), ["agent", "tools", "verify"]);
  const custom = parts.filter((p) => p.event === "custom").map((p) => p.data.type);
  assert.ok(custom.includes("tool_finished"));
  const state = await client.threads.getState(thread.thread_id);
  assert.equal(state.values.status, "verified");
  const history = await client.threads.getHistory(thread.thread_id, { limit: 50 });
  assert.ok(history.length > 3);

  // joinStream with lastEventId "-1" replays the whole run, the same events once each.
  const replay = await collect(client.runs.joinStream(thread.thread_id, runId, { lastEventId: "-1" }));
  const live = parts.filter((p) => ["updates", "custom"].includes(p.event));
  const again = replay.filter((p) => ["updates", "custom"].includes(p.event));
  assert.deepEqual(again.map((p) => p.data), live.map((p) => p.data));
  assert.equal(replay.at(-1).event, "end");
  // ... and from the middle, only what came after.
  const all = await collect(client.runs.joinStream(thread.thread_id, runId, { lastEventId: "3" }));
  assert.ok(all.length < replay.length && all.length > 0);
  const runs = await client.runs.list(thread.thread_id);
  assert.equal(runs[0].run_id, runId);
  const run = await client.runs.get(thread.thread_id, runId);
  assert.equal(run.status, "success");
});

test("threads.joinStream joins the thread's active run, and resumes after lastEventId", async () => {
  const thread = await client.threads.create();
  // An idle thread: the stream ends at once, with nothing in it.
  assert.deepEqual(await collect(client.threads.joinStream(thread.thread_id)), []);
  const run = await client.runs.create(thread.thread_id, "agent", {
    input: { task: { name: "counter", params: { n: 3, delay: 0.3 } } },
    streamMode: ["updates", "custom"],
  });
  const parts = await collect(client.threads.joinStream(thread.thread_id));
  assert.equal(parts[0].event, "metadata");
  assert.equal(parts[0].data.run_id, run.run_id);
  assert.equal(parts.at(-1).event, "end");
  assert.equal(parts.at(-1).data.status, "success");
  assert.ok(parts.some((p) => p.event === "updates"));
  // The run's own stream from an event on: only what came after it.
  const rest = await collect(client.runs.joinStream(thread.thread_id, run.run_id, { lastEventId: "2" }));
  assert.equal(rest.at(-1).event, "end");
  assert.ok(rest.length < parts.length, `${rest.length} < ${parts.length}`);
});

test("joinStream's streamMode narrows a run's stream: a list or one mode, runs and threads", async () => {
  // Each SDK puts a list in the query its own way; the server reads both, and one mode.
  const queries = [];
  const watched = clientWith({
    onRequest: (url, init) => {
      if (url.pathname.endsWith("/stream")) queries.push(url.searchParams.getAll("stream_mode"));
      return init;
    },
  });
  const modesOf = (parts) => [...new Set(parts.map((p) => p.event))].filter((e) => e !== "metadata" && e !== "end").sort();
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, "agent", {
    input: { task: { name: "counter", params: { n: 3, delay: 0.3 } } },
    streamMode: ["values", "updates", "custom"],
  });
  // The thread's active run, joined for two of its three modes.
  const joined = await collect(
    watched.threads.joinStream(thread.thread_id, { lastEventId: "-1", streamMode: ["updates", "custom"] }),
  );
  assert.equal(joined[0].event, "metadata");
  assert.equal(joined[0].data.run_id, run.run_id);
  assert.equal(joined.at(-1).event, "end");
  assert.deepEqual(modesOf(joined), ["custom", "updates"]);
  // 1.x repeats the parameter; 2.0.0 sends one JSON array (stream_mode=["updates","custom"]).
  const sent = sdkVersion === "2.0.0" ? ['["updates","custom"]'] : ["updates", "custom"];
  assert.deepEqual(queries[0], sent);
  // The run's stream, replayed: a list of one, one mode, a list of two.
  const runJoin = (streamMode) =>
    collect(watched.runs.joinStream(thread.thread_id, run.run_id, { lastEventId: "-1", streamMode }));
  assert.deepEqual(modesOf(await runJoin(["updates"])), ["updates"]);
  assert.deepEqual(modesOf(await runJoin("custom")), ["custom"]);
  assert.deepEqual(modesOf(await runJoin(["values", "custom"])), ["custom", "values"]);
  assert.deepEqual(modesOf(await runJoin(undefined)), ["custom", "updates", "values"]);
  // A mode that is not one is refused, by name.
  await assert.rejects(runJoin(["updates", "telepathy"]), (err) => err.status === 422 && /telepathy/.test(err.message));
  await assert.rejects(
    collect(watched.threads.joinStream(thread.thread_id, { streamMode: ["telepathy"] })),
    (err) => err.status === 422 && /telepathy/.test(err.message),
  );
});

test("a run forks from a checkpoint (useStream's regenerate and edit)", async () => {
  const thread = await client.threads.create();
  const say = (text) => ({ messages: [{ type: "human", content: [{ type: "text", text }] }] });
  await client.runs.wait(thread.thread_id, "agent", { input: say("first") });
  const before = (await client.threads.getState(thread.thread_id)).checkpoint;
  await client.runs.wait(thread.thread_id, "agent", { input: say("second") });
  await client.runs.wait(thread.thread_id, "agent", { input: say("second, edited"), checkpoint: before });
  const humans = (await client.threads.getState(thread.thread_id)).values.messages
    .filter((m) => m.type === "human")
    .map((m) => (typeof m.content === "string" ? m.content : m.content.map((b) => b.text).join("")));
  assert.deepEqual(humans, ["first", "second, edited"]);
  const found = await client.threads.search({ metadata: { graph_id: "agent" }, limit: 100 });
  assert.ok(found.some((t) => t.thread_id === thread.thread_id), "the thread is listed by graph_id");
});

test("an approval interrupt, answered once by command.resume", async () => {
  const thread = await client.threads.create();
  const parts = await collect(
    client.runs.stream(thread.thread_id, "agent", { input: GREET, streamMode: ["updates"] }),
  );
  const interrupt = parts
    .filter((p) => p.event === "updates" && p.data.__interrupt__)
    .flatMap((p) => p.data.__interrupt__)[0];
  assert.ok(interrupt, "the write asked for approval");
  // LangChain's human-in-the-loop request: one action request, and how it may be answered.
  assert.deepEqual(
    interrupt.value.action_requests.map((a) => a.name),
    ["write_file"],
  );
  assert.deepEqual(interrupt.value.review_configs[0].allowed_decisions, ["approve", "edit", "reject"]);
  assert.equal(interrupt.value.tool_call_ids.length, 1);
  assert.equal(parts.at(-1).data.status, "success"); // paused: the run did all it could
  const interrupted = await client.threads.get(thread.thread_id);
  assert.equal(interrupted.status, "interrupted");
  const result = await client.runs.wait(thread.thread_id, "agent", {
    command: { resume: { [interrupt.id]: { decisions: [{ type: "approve" }] } } },
  });
  assert.equal(result.status, "verified");
  // A second answer to the same interrupt is refused.
  await assert.rejects(
    client.runs.wait(thread.thread_id, "agent", {
      command: { resume: { [interrupt.id]: { decisions: [{ type: "reject" }] } } },
    }),
    (err) => err.status === 409,
  );
});

test("parallel asks: one interrupt, answered with a decision per call, in order", async () => {
  const thread = await client.threads.create();
  const parts = await collect(
    client.runs.stream(thread.thread_id, "agent", { input: NOTES, streamMode: ["updates"] }),
  );
  const interrupts = parts.filter((p) => p.event === "updates" && p.data.__interrupt__).flatMap((p) => p.data.__interrupt__);
  assert.equal(interrupts.length, 1, "one interrupt for the step's two writes");
  const [interrupt] = interrupts;
  assert.deepEqual(
    interrupt.value.action_requests.map((a) => [a.name, a.args.path]),
    [
      ["write_file", "a.txt"],
      ["write_file", "b.txt"],
    ],
  );
  assert.equal(interrupt.value.review_configs.length, 2);
  assert.equal(interrupt.value.tool_call_ids.length, 2);
  // One decision for two calls is refused, naming how many it takes.
  await assert.rejects(
    client.runs.wait(thread.thread_id, "agent", { command: { resume: { decisions: [{ type: "approve" }] } } }),
    (err) => err.status === 422,
  );
  // The resume as agent-chat-ui sends it: not keyed by interrupt id (it is the only one).
  const values = await client.runs.wait(thread.thread_id, "agent", {
    command: { resume: { decisions: [{ type: "approve" }, { type: "reject", message: "not b" }] } },
  });
  const results = Object.fromEntries(values.messages.filter((m) => m.type === "tool").map((m) => [m.tool_call_id, m]));
  const [first, second] = interrupt.value.tool_call_ids;
  assert.equal(results[first].status, "success");
  assert.equal(results[second].status, "error");
  assert.match(String(results[second].content), /not b/);
  const headers = process.env.THREADLINE_API_KEY ? { "x-api-key": process.env.THREADLINE_API_KEY } : {};
  const file = (path) => fetch(`${apiUrl}/threads/${thread.thread_id}/workspace/${path}`, { headers });
  assert.equal(await (await file("a.txt")).text(), "alpha\n");
  assert.equal((await file("b.txt")).status, 404);
});

test("a run on a new thread with ifNotExists, and a wait", async () => {
  const id = crypto.randomUUID();
  const values = await client.runs.wait(id, "agent", { input: COUNTER, ifNotExists: "create" });
  assert.equal(values.status, "verified");
  const thread = await client.threads.get(id);
  assert.equal(thread.status, "idle");
});
