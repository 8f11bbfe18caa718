import type { AgentEvent } from "../core/agent-events.js";
import type { ModelClient, ModelRequest } from "../core/model.js";
import { BOUNDS, progressRows, shownText, wrapped } from "./approval-view.js";
import type { Terminal } from "./terminal.js";
import { columns, oneLine, shownAnswer } from "./visible.js";

/** Marks a subagent's progress rows and status (chapter 6): its turns and calls interleave with the parent's. */
export const SUBAGENT_LEAD = "子 Agent ";

/** Columns of a result's preview: with `  ✓ ok  ` before it, one row of an 80-column terminal. */
export const PREVIEW_COLUMNS = 56;
/** How much of a result is read for its preview: a 10 MiB file's first line needs no more. */
const PREVIEW_SCAN = 4096;

/**
 * What a tool returned, at a glance: its first line that is not blank, escaped and cut to `PREVIEW_COLUMNS`, and
 * ` …` when more follows. The model reads the whole result; this only tells the person it was the expected one.
 * `readable` turns the start of the result into what a person reads before it is escaped for the terminal.
 */
export function resultPreview(content: string, readable: (head: string) => string = (head) => head): string {
  const head = readable(content.slice(0, PREVIEW_SCAN));
  const lines = head.split("\n");
  const index = lines.findIndex((line) => line.trim() !== "");
  if (index === -1) return "";
  const first = (lines[index] as string).trim();
  const rest = lines.slice(index + 1).some((line) => line.trim() !== "") || content.length > PREVIEW_SCAN;
  return `${shownText(first, PREVIEW_COLUMNS)}${rest ? " …" : ""}`;
}

// An escaped backslash (so the `u` after it is text), a surrogate pair, or one UTF-16 unit, as JSON escapes them.
const JSON_UNIT_ESCAPE = /\\\\|\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})|\\u([0-9a-f]{4})/g;

/**
 * A `todo_write` result as a person reads it (chapter 5): the model gets the snapshot in ASCII, every character
 * above U+007F as a `\uXXXX` escape, and the person gets those characters back. Every other escape stays as it is
 * (`\"`, `\\`, a control's `\u001b`, a lone surrogate's `\ud800`), and what a terminal would obey or draw as
 * nothing is escaped again by `resultPreview`.
 */
export function todoSnapshotText(json: string): string {
  return json.replace(JSON_UNIT_ESCAPE, (escape, high?: string, low?: string, unit?: string) => {
    if (high !== undefined && low !== undefined) return String.fromCharCode(parseInt(high, 16), parseInt(low, 16));
    const code = unit === undefined ? 0 : parseInt(unit, 16);
    return code > 0x7f && (code < 0xd800 || code > 0xdfff) ? String.fromCharCode(code) : escape;
  });
}

/** `model`, passing what it says beside its tool calls to `say` as the reply arrives, before the calls run. */
export function showingModelText(model: ModelClient, say: (text: string, request: ModelRequest) => void): ModelClient {
  return {
    async complete(request) {
      const reply = await model.complete(request);
      const { content, toolCalls } = reply.message;
      if (toolCalls.length > 0 && content !== null && content.trim() !== "") say(content, request);
      return reply;
    },
  };
}

/**
 * Chapter 9: the status while one of memory's side queries runs (memory's `querying` notice). They are no turns of
 * the run (no `model_request` event), so without these the status would still read the last turn's `等待模型回复`.
 */
export const MEMORY_QUERY_STATUS = Object.freeze({
  selector: "正在选择相关记忆…",
  extractor: "正在提取记忆…",
  consolidator: "正在整理记忆…",
});

/** Rows of the model's words beside its tool calls a run shows; the rest is counted, not shown. */
export const MODEL_TEXT_ROWS = 12;
/** Code units of those words read at all: a reply of megabytes is not drawn, only its start. */
const MODEL_TEXT_SCAN = 4000;

/**
 * What the model said beside its tool calls, as rows for the terminal, each after `lead`: every line escaped as a
 * one-line value is (tabs, controls and characters that draw nothing shown as escapes, so its width is what it
 * measures), marked where it begins like one of the CLI's own (as the answer is), cut into rows of our own when it
 * is wider than a row, and at most `MODEL_TEXT_ROWS` rows in all.
 */
export function modelTextRows(text: string, lead = ""): string[] {
  const rows = text
    .slice(0, MODEL_TEXT_SCAN)
    .trim()
    .split("\n")
    .map((line) => `${lead}${shownAnswer(oneLine(line))}`)
    .flatMap((row) => (columns(row) > BOUNDS.row ? wrapped(row, 0) : [row]));
  if (rows.length <= MODEL_TEXT_ROWS && text.length <= MODEL_TEXT_SCAN) return rows;
  const left = rows.length - MODEL_TEXT_ROWS;
  return [...rows.slice(0, MODEL_TEXT_ROWS), `${lead}${left > 0 ? `(还有 ${left} 行未显示)` : "(后面还有, 未显示)"}`];
}

/**
 * Shows each step as it happens: waiting on the model, each tool call, how long it has run, and how it ended.
 * `lead` starts every row and status of this listener's run (`SUBAGENT_LEAD` for a child's).
 */
export function progressListener(terminal: Terminal, lead = ""): (event: AgentEvent) => void {
  return (event) => {
    switch (event.type) {
      case "model_request":
        terminal.status(`${lead}等待模型回复 (第 ${event.turn} 轮)…`);
        return;
      case "tool_call":
        // The model's name and arguments, bounded like the approval's view of them.
        for (const row of progressRows(event.call.name, event.call.arguments, lead)) terminal.line(row);
        terminal.busy(`${lead}运行中: ${shownText(event.call.name, 24)}`);
        return;
      case "tool_result": {
        const { result } = event;
        terminal.idle();
        if (!result.isError) {
          const readable = event.call.name === "todo_write" ? todoSnapshotText : undefined;
          const preview = resultPreview(result.content, readable);
          terminal.line(`${lead}  ${terminal.green("✓ ok")}${preview === "" ? "" : `  ${preview}`}`);
        } else if (result.errorCode === "permission_denied") terminal.line(`${lead}  ${terminal.yellow("✗ denied")}`);
        else terminal.line(`${lead}  ${terminal.red(`✗ ${oneLine(result.errorCode ?? "error")}`)}`);
        return;
      }
    }
  };
}
