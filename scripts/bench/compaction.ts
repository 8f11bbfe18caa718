// compaction: chapter 8's two seams. One reply's results through CompactionManager.compactToolResults at the book's
// thresholds, side by side with the same reply through the same loop without a processor; and a long run's request
// history with prepare() (snip, micro, summary) against the same run without it.
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { AgentRunner } from "../../code/chapters/ch08/src/core/loop.js";
import { assistantMessage, toolCall } from "../../code/chapters/ch08/src/core/messages.js";
import type { ModelClient, ModelReply, ModelRequest } from "../../code/chapters/ch08/src/core/model.js";
import { ToolRegistry, toolSuccess, type ToolResult } from "../../code/chapters/ch08/src/core/tools.js";
import {
  CompactionManager,
  CompactionSummary,
  historyUtf8Bytes,
} from "../../code/chapters/ch08/src/features/compaction.js";
import { nowNs, ratioOfMedians, rounds, summarize } from "./stats.js";
import { ratioText, type Row } from "./table.js";
import { makeTemp, removeTemp } from "./temp.js";

const SUMMARY = JSON.stringify({
  current_goal: "bench",
  key_findings: ["the tool returns filler"],
  files_read_or_changed: [],
  remaining_work: ["go on"],
  user_constraints: [],
});

/** Replies in order; a request that offers no tools (the summary's) gets the five-field JSON. */
function scripted(replies: readonly ModelReply[], seen: ModelRequest[]): ModelClient {
  let next = 0;
  return {
    complete(request) {
      if (request.tools.length === 0) {
        return Promise.resolve({ message: assistantMessage(SUMMARY), finishReason: "stop" });
      }
      seen.push(request);
      const reply = replies[next] as ModelReply;
      next += 1;
      return Promise.resolve(reply);
    },
  };
}

/** One tool, `emit {bytes}`, answering that many ASCII bytes (made once per size). */
function emitTools(): ToolRegistry {
  const made = new Map<number, ToolResult>();
  const tools = new ToolRegistry();
  tools.register({
    name: "emit",
    description: "returns filler",
    inputSchema: z.strictObject({ bytes: z.number().int().positive() }),
    effect: "read",
    handler: ({ bytes }) => {
      let result = made.get(bytes);
      if (result === undefined) {
        result = toolSuccess("x".repeat(bytes));
        made.set(bytes, result);
      }
      return Promise.resolve(result);
    },
  });
  return tools;
}

const reply = (sizes: readonly number[], turn: number): ModelReply => ({
  message: assistantMessage(
    null,
    sizes.map((bytes, index) => toolCall(`t${turn}-c${index}`, "emit", JSON.stringify({ bytes }))),
  ),
  finishReason: "tool_calls",
});
const done: ModelReply = { message: assistantMessage("done"), finishReason: "stop" };

function runner(workspace: string, replies: readonly ModelReply[], seen: ModelRequest[], compact: boolean) {
  const model = scripted(replies, seen);
  const manager = new CompactionManager({
    workspace,
    summarizer: {
      summarize: () =>
        Promise.resolve(
          new CompactionSummary({
            currentGoal: "bench",
            keyFindings: ["the tool returns filler"],
            filesReadOrChanged: [],
            remainingWork: ["go on"],
            userConstraints: [],
          }),
        ),
    },
  });
  return new AgentRunner({
    model,
    tools: emitTools(),
    systemPrompt: "bench",
    workspace,
    maxTurns: replies.length,
    ...(compact
      ? {
          historyProcessor: manager,
          toolResultProcessor: async (results: readonly ToolResult[]) =>
            (await manager.compactToolResults(results)).results,
        }
      : {}),
  });
}

const BATCHES: readonly { readonly label: string; readonly sizes: readonly number[] }[] = [
  { label: "32 results of 6,000 bytes (192,000: all inline)", sizes: Array.from({ length: 32 }, () => 6_000) },
  { label: "7 results of 29,000 bytes (203,000: one saved)", sizes: Array.from({ length: 7 }, () => 29_000) },
  { label: "one 60,000-byte result (saved)", sizes: [60_000] },
];

export async function benchCompaction(options: {
  readonly runs: number;
  readonly longRuns: number;
}): Promise<{ rows: Row[]; notes: string[] }> {
  const workspace = makeTemp("compaction");
  const rows: Row[] = [];
  const notes: string[] = [];
  const clear = (): void => rmSync(join(workspace, ".agent_tutorial"), { recursive: true, force: true });
  try {
    for (const batch of BATCHES) {
      const once = (compact: boolean) => async (): Promise<number> => {
        clear();
        const agent = runner(workspace, [reply(batch.sizes, 1), done], [], compact);
        const start = nowNs();
        await agent.run("go");
        return nowNs() - start;
      };
      const samples = await rounds({ with: once(true), without: once(false) }, { runs: options.runs, warmup: 2 });
      rows.push(
        {
          name: `compaction: one reply, ${batch.label}, P08's processors`,
          kind: "time",
          value: summarize(samples.with),
          ratio: ratioText(ratioOfMedians(samples.with, samples.without), "unprocessed"),
        },
        {
          name: `compaction: the same reply unprocessed (P07's loop)`,
          kind: "time",
          value: summarize(samples.without),
        },
      );
    }

    // 60 turns, each one 29,000-byte result: under the per-result threshold, so only snip, micro and the summary act.
    const turns = [...Array.from({ length: 59 }, (_, turn) => reply([29_000], turn)), done];
    const sizes = { with: [] as number[], without: [] as number[] };
    let transcripts = 0;
    const long = (compact: boolean) => async (): Promise<number> => {
      clear();
      const seen: ModelRequest[] = [];
      const agent = runner(workspace, turns, seen, compact);
      const start = nowNs();
      await agent.run("go");
      const elapsed = nowNs() - start;
      if (compact) transcripts = readdirSync(join(workspace, ".agent_tutorial", "artifacts")).length;
      // The request history: what follows the system prompt.
      (compact ? sizes.with : sizes.without).splice(
        0,
        Infinity,
        ...seen.map((request) => historyUtf8Bytes(request.messages.slice(1))),
      );
      return elapsed;
    };
    const longSamples = await rounds({ with: long(true), without: long(false) }, { runs: options.longRuns, warmup: 1 });
    rows.push(
      {
        name: "compaction: 60 turns of 29,000-byte results, with prepare()",
        kind: "time",
        value: summarize(longSamples.with),
        ratio: ratioText(ratioOfMedians(longSamples.with, longSamples.without), "without"),
      },
      {
        name: "compaction: the same 60 turns without a processor",
        kind: "time",
        value: summarize(longSamples.without),
      },
    );
    const at = (list: readonly number[], turn: number): string => (list[turn - 1] ?? 0).toLocaleString("en-US");
    notes.push(
      "compaction: the first two replies leave more than 50,000 bytes inline, so their time includes what the next " +
        "request's prepare() does then: the transcript written and synced, and the summary call (answered at once here); " +
        "the third is one artifact written and synced, its preview under the threshold.",
      `compaction: request history bytes at turns 10, 30 and 60 — with compaction ${at(sizes.with, 10)}, ` +
        `${at(sizes.with, 30)}, ${at(sizes.with, 60)} (largest ${Math.max(...sizes.with).toLocaleString("en-US")}); ` +
        `without ${at(sizes.without, 10)}, ${at(sizes.without, 30)}, ${at(sizes.without, 60)}. ` +
        `A run with compaction wrote ${transcripts} transcripts (one per summary).`,
    );
    return { rows, notes };
  } finally {
    removeTemp(workspace);
  }
}
