// Assistants and thread state through LangChain's JavaScript SDK (@langchain/langgraph-sdk):
// assistant search, count, graph and schemas; thread count, search by ids with sorting; history
// filters, the state at a checkpoint, state updates and copies. Run by tests/api/test_js_sdk.py.
import assert from "node:assert/strict";
import { test } from "node:test";
import { AGENT_ASSISTANT, client } from "./client.mjs";
const COUNTER = { task: { name: "counter", params: { n: 2, delay: 0 } } };

async function finishedThread(metadata = {}) {
  const thread = await client.threads.create({ metadata });
  await client.runs.wait(thread.thread_id, "agent", { input: COUNTER });
  return thread.thread_id;
}

test("assistants: search with filters, count, graph, schemas", async () => {
  const found = await client.assistants.search({ graphId: "agent", limit: 5, sortBy: "name", sortOrder: "asc" });
  assert.deepEqual(found.map((a) => a.assistant_id), [AGENT_ASSISTANT]);
  assert.equal(found[0].version, 1);
  assert.ok(found[0].created_at && found[0].updated_at);
  // A graph that is not served is a 404, as on LangGraph Server.
  await assert.rejects(client.assistants.search({ graphId: "nope" }), (err) => err.status === 404);
  assert.ok((await client.assistants.count()) >= 1);
  await assert.rejects(client.assistants.count({ graphId: "nope" }), (err) => err.status === 404);
  const graph = await client.assistants.getGraph("agent", { xray: true });
  assert.ok(graph.nodes.some((n) => n.id === "agent"));
  const schemas = await client.assistants.getSchemas("agent");
  assert.equal(schemas.graph_id, "agent");
  assert.ok("messages" in schemas.state_schema.properties);
  assert.deepEqual(await client.assistants.getSubgraphs("agent"), {});
});

test("threads: count and search by ids, sorted", async () => {
  const tag = `js-${Date.now()}-${Math.random()}`;
  const made = [];
  for (let i = 0; i < 3; i++) made.push((await client.threads.create({ metadata: { tag } })).thread_id);
  assert.equal(await client.threads.count({ metadata: { tag } }), 3);
  const two = await client.threads.search({ ids: made.slice(0, 2) });
  assert.deepEqual(two.map((t) => t.thread_id).sort(), made.slice(0, 2).sort());
  const asc = await client.threads.search({ metadata: { tag }, sortBy: "thread_id", sortOrder: "asc" });
  assert.deepEqual(asc.map((t) => t.thread_id), [...made].sort());
  const oldest = await client.threads.search({ metadata: { tag }, sortBy: "created_at", sortOrder: "asc" });
  assert.deepEqual(oldest.map((t) => t.thread_id), made);
  await assert.rejects(client.threads.search({ sortBy: "owner" }), (err) => err.status === 422);
});

test("history filters and the state at a checkpoint", async () => {
  const tid = await finishedThread();
  const history = await client.threads.getHistory(tid, { limit: 100 });
  assert.ok(history.length > 2);
  const inputs = await client.threads.getHistory(tid, { metadata: { source: "input" } });
  assert.ok(inputs.length > 0 && inputs.every((h) => h.metadata.source === "input"));
  const old = history.at(-2);
  const id = old.checkpoint.checkpoint_id;
  const byId = await client.threads.getState(tid, id);
  assert.equal(byId.checkpoint.checkpoint_id, id);
  assert.deepEqual(byId.values, old.values);
  const byObject = await client.threads.getState(tid, { checkpoint_id: id });
  assert.equal(byObject.checkpoint.checkpoint_id, id);
  await assert.rejects(client.threads.getState(tid, "not-a-checkpoint"), (err) => err.status === 404);
});

test("updateState writes messages, refuses control fields; copy makes a new thread", async () => {
  const tid = await finishedThread({ who: "js" });
  const before = await client.threads.getState(tid);
  const out = await client.threads.updateState(tid, { values: { messages: [{ role: "user", content: "note" }] } });
  assert.ok(out.checkpoint.checkpoint_id);
  const after = await client.threads.getState(tid);
  assert.equal(after.values.messages.length, before.values.messages.length + 1);
  assert.equal(after.checkpoint.checkpoint_id, out.checkpoint.checkpoint_id);
  await assert.rejects(client.threads.updateState(tid, { values: { status: "verified" } }), (err) => err.status === 422);
  await assert.rejects(
    client.threads.updateState(tid, { values: { messages: [] }, asNode: "tools" }),
    (err) => err.status === 422,
  );
  const copy = await client.threads.copy(tid);
  assert.notEqual(copy.thread_id, tid);
  assert.equal(copy.metadata.who, "js");
  const copied = await client.threads.getState(copy.thread_id);
  assert.deepEqual(copied.values, after.values);
  await assert.rejects(client.threads.copy("00000000-0000-0000-0000-000000000000"), (err) => err.status === 404);
});
