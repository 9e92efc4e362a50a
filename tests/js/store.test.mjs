// LangChain's JavaScript SDK (@langchain/langgraph-sdk) on long-term memory: client.store's put,
// get, search with filters, delete and list namespaces against a real threadline server at
// THREADLINE_URL (tests/api/test_js_sdk.py starts it, with and without an API key).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { client } from "./client.mjs";

test("store: put, get, search with filters, list namespaces, delete", async () => {
  const root = `js-${randomUUID()}`;
  await client.store.putItem([root, "prefs"], "theme", { value: "dark", rank: 1 });
  await client.store.putItem([root, "prefs"], "lang", { value: "en", rank: 2 });
  await client.store.putItem([root, "notes", "daily"], "today", { value: "write tests", rank: 3 });

  const item = await client.store.getItem([root, "prefs"], "theme");
  assert.deepEqual(item.namespace, [root, "prefs"]);
  assert.equal(item.key, "theme");
  assert.deepEqual(item.value, { value: "dark", rank: 1 });
  assert.ok(item.createdAt && item.updatedAt, "createdAt and updatedAt are set");
  assert.equal(await client.store.getItem([root, "prefs"], "missing"), null);

  const all = await client.store.searchItems([root]);
  assert.deepEqual(all.items.map((i) => i.key).sort(), ["lang", "theme", "today"]);
  const dark = await client.store.searchItems([root], { filter: { value: "dark" } });
  assert.deepEqual(dark.items.map((i) => i.key), ["theme"]);
  const ranked = await client.store.searchItems([root], { filter: { rank: { $gte: 2 } }, limit: 10 });
  assert.deepEqual(ranked.items.map((i) => i.key).sort(), ["lang", "today"]);
  const page = await client.store.searchItems([root], { limit: 2, offset: 2 });
  assert.equal(page.items.length, 1);

  const spaces = await client.store.listNamespaces({ prefix: [root] });
  assert.deepEqual(spaces.namespaces.sort(), [[root, "notes", "daily"], [root, "prefs"]]);
  const shallow = await client.store.listNamespaces({ prefix: [root], maxDepth: 2 });
  assert.deepEqual(shallow.namespaces.sort(), [[root, "notes"], [root, "prefs"]]);
  const bySuffix = await client.store.listNamespaces({ prefix: [root], suffix: ["daily"] });
  assert.deepEqual(bySuffix.namespaces, [[root, "notes", "daily"]]);

  await client.store.putItem([root, "prefs"], "theme", { value: "light" });
  assert.deepEqual((await client.store.getItem([root, "prefs"], "theme")).value, { value: "light" });
  await client.store.deleteItem([root, "prefs"], "theme");
  assert.equal(await client.store.getItem([root, "prefs"], "theme"), null);
});

test("store: malformed items are refused with 422", async () => {
  const root = `js-${randomUUID()}`;
  await assert.rejects(client.store.putItem([root], "", { a: 1 }), (err) => err.status === 422);
  await assert.rejects(client.store.putItem([root], "k", [1, 2]), (err) => err.status === 422);
  await assert.rejects(client.store.putItem([], "k", { a: 1 }), (err) => err.status === 422);
  await assert.rejects(client.store.searchItems([root], { limit: 0 }), (err) => err.status === 422);
  await assert.rejects(
    client.store.searchItems([root], { filter: { a: { $regex: "x" } } }),
    (err) => err.status === 422,
  );
  await assert.rejects(client.store.listNamespaces({ maxDepth: 0 }), (err) => err.status === 422);
});
