// The official AG-UI client across a SIGKILL of the server (tests/api/test_ag_ui_js.py drives
// it in two phases):
//   node reconnect.mjs start OUT   runAgent a slow counter run; after the second tool result,
//                                  SIGKILL the server (THREADLINE_PID) and write the events seen
//                                  and the ids to OUT
//   node reconnect.mjs resume OUT  a new HttpAgent on the same thread continues the same runId
//                                  with Last-Event-ID = the last event's rawEvent position; the
//                                  events it gets are added to OUT
// HttpAgent checks every stream it reads (order, starts before contents): a continuation it
// rejected would fail runAgent.
import { readFileSync, writeFileSync } from "node:fs";
import { randomUUID } from "node:crypto";

import { HttpAgent } from "@ag-ui/client";

const [phase, out] = process.argv.slice(2);
const URL = `${process.env.THREADLINE_URL}/ag-ui/agent`;
const COUNT = "Count to six.\n\n(threadline task: counter {\"n\": 6, \"delay\": 0.4})";

function positionOf(event) {
  return event.rawEvent?.threadline?.event_id ?? null;
}

if (phase === "start") {
  const threadId = randomUUID();
  const runId = randomUUID();
  const agent = new HttpAgent({
    url: URL,
    threadId,
    initialMessages: [{ id: randomUUID(), role: "user", content: COUNT }],
  });
  const seen = [];
  let killed = false;
  agent.subscribe({
    onEvent: ({ event }) => {
      seen.push(event);
      const results = seen.filter((e) => e.type === "TOOL_CALL_RESULT").length;
      if (results === 2 && !killed) {
        killed = true;
        process.kill(Number(process.env.THREADLINE_PID), "SIGKILL");
      }
    },
  });
  const save = (failed) => writeFileSync(out, JSON.stringify({ threadId, runId, failed, seen }));
  // The broken connection surfaces as runAgent's rejection or, from the response body's
  // reader, as an error no promise holds: either is the failure this phase expects.
  const broken = (err) => {
    if (!killed) throw err;
    save(String(err));
    process.exit(0);
  };
  process.on("uncaughtException", broken);
  process.on("unhandledRejection", broken);
  try {
    await agent.runAgent({ runId });
    save(null);
  } catch (err) {
    broken(err);
  }
} else if (phase === "resume") {
  const state = JSON.parse(readFileSync(out, "utf8"));
  const last = positionOf(state.seen.at(-1));
  const agent = new HttpAgent({
    url: URL,
    threadId: state.threadId,
    headers: { "Last-Event-ID": last },
  });
  const rest = [];
  agent.subscribe({ onEvent: ({ event }) => { rest.push(event); } });
  const { newMessages } = await agent.runAgent({ runId: state.runId });
  writeFileSync(
    out,
    JSON.stringify({ ...state, last, rest, newMessages, pending: agent.pendingInterrupts }),
  );
} else {
  throw new Error(`unknown phase ${phase}`);
}
