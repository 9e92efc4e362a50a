// The official AG-UI client (@ag-ui/client's HttpAgent) against a real threadline server:
// THREADLINE_URL names it (tests/api/test_ag_ui_js.py starts one). The client verifies the
// order of the events itself (a stream it rejects fails runAgent).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";

import { HttpAgent } from "@ag-ui/client";

const URL = process.env.THREADLINE_URL;
const KEY = process.env.THREADLINE_API_KEY;
const GREET = "Write the line 'Hello, Ada!' to greeting.txt.\n\n" +
  '(threadline task: greet {"name": "Ada"})';

function agent(content) {
  const made = new HttpAgent({
    url: `${URL}/ag-ui/agent`,
    threadId: randomUUID(),
    headers: KEY ? { "x-api-key": KEY } : {},
    initialMessages: [{ id: randomUUID(), role: "user", content }],
  });
  const events = [];
  made.subscribe({ onEvent: ({ event }) => { events.push(event); } });
  return { made, events };
}

test("a run that succeeds streams its text in order", async () => {
  const { made, events } = agent("hello");
  const runId = randomUUID();
  const { newMessages } = await made.runAgent({ runId });
  const types = events.map((e) => e.type);
  assert.equal(types[0], "RUN_STARTED");
  assert.equal(events[0].runId, runId);
  assert.equal(events[0].threadId, made.threadId);
  assert.equal(types.at(-1), "RUN_FINISHED");
  assert.deepEqual(events.at(-1).outcome, { type: "success" });
  for (const type of ["STATE_SNAPSHOT", "STEP_STARTED", "STEP_FINISHED", "MESSAGES_SNAPSHOT"]) {
    assert.ok(types.includes(type), `${type} in ${types}`);
  }
  const start = types.indexOf("TEXT_MESSAGE_START");
  const end = types.indexOf("TEXT_MESSAGE_END");
  assert.ok(start > 0 && end > start, types.join(","));
  const deltas = events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT");
  assert.ok(deltas.length > 3, "the text arrives in several deltas");
  const text = deltas.map((e) => e.delta).join("");
  assert.match(text, /No language model is configured/);
  const reply = newMessages.find((m) => m.role === "assistant");
  assert.equal(reply.content, text);
  assert.equal(made.messages.length, 2);
  assert.deepEqual(made.pendingInterrupts, []);
});

test("an approval: an interrupt outcome, then a resume that completes", async () => {
  const { made, events } = agent(GREET);
  await made.runAgent({ runId: randomUUID() });
  const finished = events.at(-1);
  assert.equal(finished.type, "RUN_FINISHED");
  assert.equal(finished.outcome.type, "interrupt");
  const [interrupt] = finished.outcome.interrupts;
  assert.equal(interrupt.reason, "tool_approval");
  assert.equal(interrupt.metadata.value.action_requests[0].name, "write_file");
  const call = events.find((e) => e.type === "TOOL_CALL_START");
  assert.equal(call.toolCallName, "write_file");
  assert.equal(interrupt.toolCallId, call.toolCallId);
  assert.equal(made.pendingInterrupts.length, 1);

  events.length = 0;
  const resumeRun = randomUUID();
  await made.runAgent({
    runId: resumeRun,
    resume: [{ interruptId: interrupt.id, status: "resolved", payload: { decisions: [{ type: "approve" }] } }],
  });
  const types = events.map((e) => e.type);
  assert.equal(types[0], "RUN_STARTED");
  assert.equal(events[0].runId, resumeRun);
  assert.deepEqual(events.at(-1).outcome, { type: "success" });
  const result = events.find((e) => e.type === "TOOL_CALL_RESULT");
  assert.equal(result.toolCallId, call.toolCallId);
  assert.deepEqual(made.pendingInterrupts, []);
  assert.ok(made.messages.some((m) => m.role === "tool" && m.toolCallId === call.toolCallId));
  assert.ok(result.content.length > 0);
  assert.equal(made.state.status, "agent_done"); // STATE_DELTA applied by the client itself
});
