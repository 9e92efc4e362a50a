// Schedules through LangChain's JavaScript SDK (client.crons) against a real threadline server
// at THREADLINE_URL: create (threadless and on a thread), search, count, update, delete, and the
// 422 a malformed schedule gets. tests/api/test_js_sdk.py runs it with `node --test`.
import assert from "node:assert/strict";
import { test } from "node:test";
import { AGENT_ASSISTANT, client, sdkVersion } from "./client.mjs";
const COUNTER = { task: { name: "counter", params: { n: 1, delay: 0 } } };

test("crons: create, createForThread, search, count, update, delete", async () => {
  const tag = `js-${Date.now()}`;
  const cron = await client.crons.create("agent", { schedule: "*/10 * * * *", input: COUNTER, metadata: { tag } });
  assert.match(cron.cron_id, /^[0-9a-f-]{36}$/);
  assert.equal(cron.assistant_id, AGENT_ASSISTANT); // what the graph's name names, as LangGraph stores it
  assert.equal(cron.thread_id, null);
  assert.equal(cron.schedule, "*/10 * * * *");
  assert.deepEqual(cron.payload.input, COUNTER);
  assert.equal(new Date(cron.next_run_date).getUTCMinutes() % 10, 0);

  const thread = await client.threads.create();
  const bound = await client.crons.createForThread(thread.thread_id, "agent", {
    schedule: "30 8 * * *",
    timezone: "America/New_York",
    multitaskStrategy: "enqueue",
    metadata: { tag },
  });
  assert.equal(bound.thread_id, thread.thread_id);
  // 2.0.0's crons client (older code than 1.15.0's; npm marks 2.0.0 deprecated) has no
  // `timezone` and drops it: the schedule then runs in UTC, as it does when none is sent.
  assert.equal(bound.timezone, sdkVersion === "2.0.0" ? null : "America/New_York");

  const found = await client.crons.search({ metadata: { tag }, sortBy: "created_at", sortOrder: "asc" });
  assert.deepEqual(found.map((c) => c.cron_id), [cron.cron_id, bound.cron_id]);
  const picked = await client.crons.search({ threadId: thread.thread_id, select: ["cron_id", "schedule"] });
  assert.deepEqual(picked, [{ cron_id: bound.cron_id, schedule: "30 8 * * *" }]);
  assert.equal(await client.crons.count({ metadata: { tag } }), 2);
  assert.equal(await client.crons.count({ threadId: thread.thread_id }), 1);

  const updated = await client.crons.update(cron.cron_id, { schedule: "0 12 * * *", enabled: false });
  assert.equal(updated.schedule, "0 12 * * *");
  assert.equal(updated.enabled, false);
  assert.equal(updated.next_run_date, null);
  const ended = await client.crons.update(bound.cron_id, { endTime: "2020-01-01T00:00:00Z" });
  assert.equal(ended.next_run_date, null, "past its end time: no due time left");

  await client.crons.delete(cron.cron_id);
  await assert.rejects(client.crons.delete(cron.cron_id), (err) => err.status === 404);
  await client.threads.delete(thread.thread_id);
  assert.equal(await client.crons.count({ metadata: { tag } }), 0, "a thread's schedules go with it");
});

test("crons: a malformed schedule is a 422 that says what to send", async () => {
  for (const schedule of ["every day", "* * * * * *", "0 0 31 2 *"]) {
    await assert.rejects(client.crons.create("agent", { schedule }), (err) => err.status === 422);
  }
  await assert.rejects(client.crons.create("no-such-assistant", { schedule: "0 * * * *" }), (err) => err.status === 404);
});
