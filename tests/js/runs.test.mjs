// LangChain's JavaScript SDK against a real threadline server at THREADLINE_URL: the runs calls
// of LangGraph Server's API beyond the basics — deleting a run, threadless runs, breakpoints
// (interruptBefore / interruptAfter), multitaskStrategy interrupt and rollback, and the
// messages / events stream modes. Run by tests/api/test_js_sdk.py with `node --test`.
import assert from "node:assert/strict";
import { test } from "node:test";
import { client } from "./client.mjs";
const QUICK = { task: { name: "counter", params: { n: 2, delay: 0 } } };
const SLOW = { task: { name: "counter", params: { n: 3, delay: 30 } } };

async function collect(stream) {
  const parts = [];
  for await (const part of stream) parts.push(part);
  return parts;
}

async function untilToolStarted(threadId, runId) {
  for await (const part of client.runs.joinStream(threadId, runId, { streamMode: ["custom"] })) {
    if (part.event === "custom" && part.data.type === "tool_started") return;
  }
  throw new Error("the run ended before its first tool call");
}

test("runs.delete removes a finished run; an active one is refused with 409", async () => {
  const thread = await client.threads.create();
  const done = await client.runs.create(thread.thread_id, "agent", { input: QUICK });
  await client.runs.join(thread.thread_id, done.run_id);
  await client.runs.delete(thread.thread_id, done.run_id);
  await assert.rejects(client.runs.get(thread.thread_id, done.run_id), (err) => err.status === 404);
  const active = await client.runs.create(thread.thread_id, "agent", { input: SLOW });
  await assert.rejects(client.runs.delete(thread.thread_id, active.run_id), (err) => err.status === 409);
  await client.runs.cancel(thread.thread_id, active.run_id, true);
  await client.runs.delete(thread.thread_id, active.run_id);
});

test("threadless runs: wait, stream and create, with onCompletion keep", async () => {
  const values = await client.runs.wait(null, "agent", { input: QUICK });
  assert.equal(values.status, "verified");
  let meta = null;
  const parts = await collect(
    client.runs.stream(null, "agent", {
      input: QUICK,
      streamMode: ["updates"],
      onCompletion: "keep",
      onRunCreated: (m) => {
        meta = m;
      },
    }),
  );
  assert.equal(parts[0].event, "metadata");
  assert.equal(parts.at(-1).event, "end");
  assert.ok(meta?.thread_id, "onRunCreated names the thread made for the run");
  const kept = await client.threads.get(meta.thread_id);
  assert.equal(kept.status, "idle");
  const again = await collect(client.runs.joinStream(null, meta.run_id, { lastEventId: "-1" }));
  assert.equal(again.at(-1).event, "end");
  const run = await client.runs.create(null, "agent", { input: QUICK, onCompletion: "keep" });
  assert.ok(run.thread_id);
  const joined = await client.runs.join(run.thread_id, run.run_id);
  assert.equal(joined.status, "verified");
});

test("interruptBefore pauses before a node; an unknown node is a 422", async () => {
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "agent", { input: QUICK, interruptBefore: ["tools"] });
  const state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state.next, ["tools"]);
  assert.equal((await client.threads.get(thread.thread_id)).status, "interrupted");
  const values = await client.runs.wait(thread.thread_id, "agent", { input: null });
  assert.equal(values.status, "verified");
  await assert.rejects(
    client.runs.create(thread.thread_id, "agent", { input: QUICK, interruptAfter: ["nope"] }),
    (err) => err.status === 422,
  );
});

test("multitaskStrategy interrupt and rollback cancel the active run first", async () => {
  const thread = await client.threads.create();
  const first = await client.runs.create(thread.thread_id, "agent", { input: SLOW });
  await untilToolStarted(thread.thread_id, first.run_id);
  const second = await client.runs.create(thread.thread_id, "agent", { input: QUICK, multitaskStrategy: "interrupt" });
  await client.runs.join(thread.thread_id, second.run_id);
  assert.equal((await client.runs.get(thread.thread_id, first.run_id)).status, "interrupted");
  assert.equal((await client.runs.get(thread.thread_id, second.run_id)).status, "success");

  const third = await client.runs.create(thread.thread_id, "agent", { input: SLOW });
  await untilToolStarted(thread.thread_id, third.run_id);
  const fourth = await client.runs.create(thread.thread_id, "agent", { input: QUICK, multitaskStrategy: "rollback" });
  await client.runs.join(thread.thread_id, fourth.run_id);
  await assert.rejects(client.runs.get(thread.thread_id, third.run_id), (err) => err.status === 404);
  const history = await client.threads.getHistory(thread.thread_id, { limit: 1000 });
  assert.ok(!history.some((h) => h.metadata?.run_id === third.run_id), "the rolled-back run's checkpoints are gone");
});

test("streamMode messages sends messages/metadata, /partial or /complete; events is served", async () => {
  const thread = await client.threads.create();
  const parts = await collect(client.runs.stream(thread.thread_id, "agent", { input: QUICK, streamMode: "messages" }));
  const names = parts.map((p) => p.event);
  assert.ok(!names.includes("messages"), `no tuple events in ${names}`);
  assert.ok(names.includes("messages/metadata"), `messages/metadata in ${names}`);
  assert.ok(names.some((n) => n === "messages/partial" || n === "messages/complete"), `${names}`);
  const whole = parts.find((p) => p.event === "messages/partial" || p.event === "messages/complete");
  assert.ok(Array.isArray(whole.data) && typeof whole.data[0].type === "string");
  const events = await collect(client.runs.stream(thread.thread_id, "agent", { input: QUICK, streamMode: ["events"] }));
  assert.equal(events.at(-1).event, "end");
  assert.ok(events.some((p) => p.event === "events" && p.data.event.startsWith("on_chat_model")));
});
