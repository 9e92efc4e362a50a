// The client every *.test.mjs here drives the server with: LangChain's JavaScript SDK as the
// package THREADLINE_JS_SDK names, one of package.json's two pins ("@langchain/langgraph-sdk",
// 1.15.0, npm's `latest`, which repeats a list in the query: stream_mode=a&stream_mode=b; or
// "langgraph-sdk-2", 2.0.0 under an npm alias, which sends it as JSON: stream_mode=["a","b"]),
// against the threadline server at THREADLINE_URL, with THREADLINE_API_KEY when it is set.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

export const sdk = process.env.THREADLINE_JS_SDK || "@langchain/langgraph-sdk";
const { Client } = await import(sdk);
export const sdkVersion = JSON.parse(
  readFileSync(new URL(`./node_modules/${sdk}/package.json`, import.meta.url), "utf8"),
).version;

export const apiUrl = process.env.THREADLINE_URL;
assert.ok(apiUrl, "THREADLINE_URL names the server under test");
export const apiKey = process.env.THREADLINE_API_KEY || "";
/** A client with more of the SDK's options (`onRequest`, say), to the same server. */
export function clientWith(options = {}) {
  return new Client({ apiUrl, defaultHeaders: apiKey ? { "x-api-key": apiKey } : {}, ...options });
}
export const client = clientWith();
/** Graph `agent`'s default assistant: uuid5(NAMESPACE_GRAPH, "agent"), as LangGraph names it. */
export const AGENT_ASSISTANT = "fe096781-5601-53d2-b2f6-0d3403f7e9ca";
