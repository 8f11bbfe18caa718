// Run-wide budget: what chapter 4's check against MAX_CONVERSATION_BYTES adds to a turn of a long conversation.
// The runner has no switch to leave the check out, so three things are timed round by round on the same
// conversation, in CPU time (others' load on a shared machine counts less): the real AgentRunner's turn (check
// inside, a played-back model that costs nothing), the check alone (conversationBytes, copied and verified, called
// as the runner calls it: once per turn on the history so far, each message measured once), and the request JSON
// the SDK builds every turn anyway (toOpenAIMessage + JSON.stringify).
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { toOpenAIMessage } from "../../code/chapters/ch04/src/adapters/openai-chat.js";
import { AgentRunner, MAX_CONVERSATION_BYTES } from "../../code/chapters/ch04/src/core/loop.js";
import { assistantMessage, toolCall, type ChatMessage } from "../../code/chapters/ch04/src/core/messages.js";
import type { ModelClient, ModelReply, ModelRequest } from "../../code/chapters/ch04/src/core/model.js";
import { ToolRegistry, toolSuccess } from "../../code/chapters/ch04/src/core/tools.js";
import { checkCopy, conversationBytes } from "./conversation-bytes.js";
import { cpuNs, ratioOfMedians, rounds, summarize } from "./stats.js";
import { formatValue, type Row } from "./table.js";

const WORKSPACE = fileURLToPath(new URL("../../", import.meta.url));
const RESULT_BYTES = 16 * 1024;
/** One tool result: ~16 KiB of file listing with Chinese comments, quotes and newlines (escaped in the JSON). */
const RESULT = listing(RESULT_BYTES);

/** Plays back fixed replies; keeps the requests when asked (outside the timed runs). */
class PlayedModel implements ModelClient {
  readonly requests: ModelRequest[] = [];
  #next = 0;

  constructor(
    private readonly replies: readonly ModelReply[],
    private readonly keep: boolean,
  ) {}

  complete(request: ModelRequest): Promise<ModelReply> {
    if (this.keep) this.requests.push(request);
    const reply = this.replies[this.#next];
    this.#next += 1;
    return reply === undefined ? Promise.reject(new Error("budget bench: out of replies")) : Promise.resolve(reply);
  }
}

export async function benchBudget(options: {
  readonly turns: readonly number[];
  readonly runs: number;
}): Promise<{ rows: Row[]; notes: string[] }> {
  checkCopy();
  const tools = new ToolRegistry();
  tools.register({
    name: "read_listing",
    description: "Returns the same 16 KiB listing every time",
    inputSchema: z.strictObject({}),
    effect: "read",
    handler: () => Promise.resolve(toolSuccess(RESULT)),
  });
  // Fresh replies for every run: the runner measures each message once, so reused messages would be free.
  const replies = (turns: number): ModelReply[] =>
    Array.from({ length: turns }, (_, index) =>
      index < turns - 1
        ? {
            message: assistantMessage(null, [toolCall(`call_${index}`, "read_listing", "{}")]),
            finishReason: "tool_calls",
          }
        : { message: assistantMessage("done"), finishReason: "stop" },
    );
  const runner = (turns: number, keep: boolean): { agent: AgentRunner; model: PlayedModel } => {
    const model = new PlayedModel(replies(turns), keep);
    return {
      agent: new AgentRunner({ model, tools, systemPrompt: "Bench.", workspace: WORKSPACE, maxTurns: turns }),
      model,
    };
  };

  const rows: Row[] = [];
  const notes: string[] = [];
  for (const turns of options.turns) {
    // The conversation as the runner sends it, turn by turn: every request of one run, kept.
    const played = runner(turns, true);
    const result = await played.agent.run("Bench: read the listing, again and again.");
    if (result.turns !== turns || result.finalText !== "done") throw new Error(`budget bench: ${result.turns} turns`);
    const requests = played.model.requests;
    const finalBytes = conversationBytes(result.history);
    if (finalBytes >= MAX_CONVERSATION_BYTES || finalBytes < RESULT_BYTES * (turns - 1)) {
      throw new Error(`budget bench: the conversation measures ${finalBytes} bytes`);
    }
    // Short conversations are repeated within a sample, so that every sample of the runner and the check is
    // some 400 turns long: one scheduling hiccup then weighs less.
    const repeat = Math.max(1, Math.round(400 / turns));
    let sink = 0;
    const samples = await rounds(
      {
        runner: async () => {
          const agents = Array.from({ length: repeat }, () => runner(turns, false).agent);
          const start = cpuNs();
          for (const agent of agents) {
            const run = await agent.run("Bench: read the listing, again and again.");
            if (run.turns !== turns) throw new Error(`budget bench: ${run.turns} turns`);
          }
          return (cpuNs() - start) / (turns * repeat);
        },
        check: () => {
          // New message objects (as a new run has), so each is measured once here too; built before the clock.
          const conversations = Array.from({ length: repeat }, () => {
            const copies = new Map(result.history.map((message) => [message, Object.freeze({ ...message })]));
            return requests.map((request) =>
              request.messages.slice(1).map((message) => copies.get(message) as ChatMessage),
            );
          });
          const start = cpuNs();
          for (const histories of conversations) {
            for (const history of histories) sink += conversationBytes(history);
          }
          return Promise.resolve((cpuNs() - start) / (turns * repeat));
        },
        json: () => {
          const start = cpuNs();
          for (const request of requests) {
            sink += JSON.stringify({
              model: "bench",
              messages: request.messages.map(toOpenAIMessage),
              tools: request.tools,
            }).length;
          }
          return Promise.resolve((cpuNs() - start) / turns);
        },
      },
      { runs: options.runs, warmup: 1 },
    );
    if (sink === 0) throw new Error("budget bench: nothing was measured");
    const label = `budget ${turns} turns × 16 KiB, CPU per turn`;
    const turnMedian = summarize(samples.runner).median;
    const checkMedian = summarize(samples.check).median;
    rows.push(
      {
        name: `${label}: runner turn, check inside`,
        kind: "time",
        value: summarize(samples.runner),
        ratio:
          turnMedian > checkMedian
            ? `without the check ≈ ${formatValue(turnMedian - checkMedian, "time")}`
            : "check's median ≥ the turn's: noise",
      },
      {
        name: `${label}: the check alone (conversationBytes)`,
        kind: "time",
        value: summarize(samples.check),
        ratio: `${percent(ratioOfMedians(samples.check, samples.runner), "the turn")}; ${percent(ratioOfMedians(samples.check, samples.json), "request JSON")}`,
      },
      {
        name: `${label}: request JSON (toOpenAIMessage + stringify)`,
        kind: "time",
        value: summarize(samples.json),
      },
    );
    notes.push(
      `budget ${turns} turns: ${result.history.length} messages, ${repeat} run${repeat === 1 ? "" : "s"} per sample of the runner and the check; the whole conversation ${(finalBytes / 2 ** 20).toFixed(2)} MiB as the check counts it (cap ${MAX_CONVERSATION_BYTES / 2 ** 20} MiB).`,
    );
  }
  notes.unshift(
    `budget: CPU time of the bench process per turn. The ch04 AgentRunner has no switch for the check, so "without the check" is the median runner turn minus the median of the check's own time, measured on a copy of conversationBytes (scripts/bench/conversation-bytes.ts, verified against loop.ts at start) replayed on the runner's requests with fresh messages; each tool result is ${Buffer.byteLength(RESULT)} bytes; "request JSON" is what the SDK serialises every turn with or without the check (not part of the runner turn, whose model is played back).`,
  );
  return { rows, notes };
}

function percent(ratio: number, of: string): string {
  return `${(ratio * 100).toFixed(ratio < 0.001 ? 3 : ratio < 0.1 ? 2 : 1)} % of ${of}`;
}

/** Exactly `bytes` bytes of UTF-8: numbered lines of code with Chinese comments. */
function listing(bytes: number): string {
  const lines: string[] = [];
  let used = 0;
  for (let n = 1; ; n += 1) {
    const line = `${String(n).padStart(5)}\tconst 结果${n} = await history.get("key-${n}"); // 模型看到的第 ${n} 项\n`;
    const size = Buffer.byteLength(line);
    if (used + size > bytes) {
      lines.push(" ".repeat(bytes - used));
      return lines.join("");
    }
    lines.push(line);
    used += size;
  }
}
