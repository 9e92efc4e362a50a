// Streamed text and compaction notes for the run timeline (used by app.js).
//
// `messages-tuple` events carry LangGraph's `[message, metadata]` pairs: AI message chunks as
// the model writes them (`AIMessageChunk`, one id per AI message), or whole messages from models
// that do not stream. Only the text of an AI message is shown; tool-call chunks (their arguments
// arriving in fragments) are left out, the tool entries show the calls. The final message, from
// `updates`, replaces what was streamed in the same element: one bubble per message id.

const AI_TYPES = new Set(["AIMessageChunk", "ai"]);

/** The AI message of a `messages` event's data, or null (tool, human or other messages). */
export function aiMessageOf(data) {
  const m = Array.isArray(data) ? data[0] : null;
  if (!m || typeof m !== "object" || !AI_TYPES.has(m.type) || !m.id) return null;
  return m;
}

/** The text of a message or chunk: its string content, or the text parts of a content list
 * (tool-use and argument parts carry no text and are skipped). */
export function textOf(m) {
  const c = m && m.content;
  if (typeof c === "string") return c;
  if (!Array.isArray(c)) return "";
  return c
    .map((p) => (typeof p === "string" ? p : p && typeof p === "object" && (p.type === "text" || p.type === undefined) && typeof p.text === "string" ? p.text : ""))
    .join("");
}

/** Streamed bubbles of one run: message id → the element showing its text. */
export class Bubbles {
  constructor() {
    this.byId = new Map();
  }

  get(id) {
    return id ? this.byId.get(id) || null : null;
  }

  /** The bubble for `id` inside a step's entry `li`: the entry's own text line while it is free
   * (or holds a message an earlier attempt never finished), else a new line after it. */
  claim(li, id, attempt, create) {
    let say = this.get(id);
    if (say) return say;
    const own = li.querySelector(".say");
    const stale = own && own.dataset.streaming === "true" && own.dataset.attempt !== String(attempt);
    if (own && (!own.dataset.messageId || stale)) {
      if (stale) this.byId.delete(own.dataset.messageId);
      say = own;
      say.textContent = "";
    } else {
      say = create();
      li.append(say);
    }
    say.dataset.messageId = id;
    say.dataset.attempt = String(attempt);
    this.byId.set(id, say);
    return say;
  }

  /** A chunk (appended) or a whole message (replaces the text) as it streams. */
  stream(say, m) {
    if (say.dataset.streaming === "false") return; // the final message is in already
    const piece = textOf(m);
    if (m.type === "ai") say.textContent = piece;
    else if (piece) say.append(piece);
    say.dataset.streaming = "true";
    say.hidden = !say.textContent;
  }

  /** The final message: its text replaces whatever was streamed. */
  finish(say, text) {
    say.textContent = text;
    say.dataset.streaming = "false";
    say.hidden = !text;
  }
}

const n = (v) => (typeof v === "number" && Number.isFinite(v) ? v.toLocaleString("en") : "?");

/** The timeline note of a `context_compacted` event: what was compacted, the summary folded. */
export function compactionNote(h, d) {
  const removed = Number(d.removed_messages);
  const what = `${n(removed)} message${removed === 1 ? "" : "s"} summarized`;
  const sizes = `${n(d.tokens_before)} → ${n(d.tokens_after)} tokens`;
  const budget = typeof d.budget === "number" ? ` (budget ${n(d.budget)})` : "";
  const text = `Context compacted: ${what}, ${sizes}${budget}`;
  const summary = typeof d.summary === "string" ? d.summary : "";
  return [
    h("div", { class: "ev-line" }, h("span", { class: "tag" }, "Context"), h("span", { class: "compacted" }, text)),
    summary
      ? h("details", { class: "fold summary" }, h("summary", {}, "Summary of the earlier turns"), h("pre", { class: "out" }, summary))
      : null,
  ];
}
