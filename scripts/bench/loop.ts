// loop: turns per second of the chapter 3 agent against a loopback OpenAI-compatible server, through the real SDK.
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { OpenAIChatModel } from "../../code/chapters/ch03/src/adapters/openai-chat.js";
import { buildAgent } from "../../code/chapters/ch03/src/bootstrap.js";
import type { ModelClient, ModelReply, ModelRequest } from "../../code/chapters/ch03/src/core/model.js";
import { PermissionDecision } from "../../code/chapters/ch03/src/core/permissions.js";
import { P03 } from "../../code/chapters/ch03/src/core/profiles.js";
import { nowNs, rounds, summarize } from "./stats.js";
import type { Row } from "./table.js";
import { makeTemp, removeTemp } from "./temp.js";

const TURNS = 100;
const SERVER = fileURLToPath(new URL("./loopback-child.ts", import.meta.url));
const REPO = fileURLToPath(new URL("../../", import.meta.url));

/** Times every `complete` call: what the loop spends outside it is the loop's own cost. */
class TimedModel implements ModelClient {
  spentNs = 0;
  constructor(private readonly inner: ModelClient) {}

  async complete(request: ModelRequest): Promise<ModelReply> {
    const start = nowNs();
    try {
      return await this.inner.complete(request);
    } finally {
      this.spentNs += nowNs() - start;
    }
  }
}

export async function benchLoop(options: { readonly runs: number }): Promise<{ rows: Row[]; notes: string[] }> {
  const workspace = makeTemp("loop");
  const server = await startServer();
  try {
    for (const name of ["a.txt", "b.txt", "c.md"]) writeFileSync(join(workspace, name), name);
    const model = new TimedModel(
      new OpenAIChatModel({ apiKey: "bench-key", model: "loopback", baseURL: server.baseURL, maxRetries: 0 }),
    );
    const allow = new PermissionDecision("allow", "Approved instantly by the bench", "bench");
    const split = { modelNs: [] as number[], toolNs: [] as number[] };
    let toolNs = 0;
    let toolStart = 0;
    // A runner keeps its history across runs, so every timed run gets a fresh one (built before the clock starts).
    const newAgent = () =>
      buildAgent(P03, {
        model,
        workspace,
        approvalProvider: { decide: () => Promise.resolve(allow) },
        auditSink: { record: () => undefined },
        maxTurns: TURNS,
        onEvent: (event) => {
          if (event.type === "tool_call") toolStart = nowNs();
          if (event.type === "tool_result") toolNs += nowNs() - toolStart;
        },
      });
    const samples = await rounds(
      {
        run: async () => {
          model.spentNs = 0;
          toolNs = 0;
          const agent = newAgent();
          const start = nowNs();
          const result = await agent.run("Bench: glob, 99 times.");
          const total = nowNs() - start;
          if (result.turns !== TURNS || result.finalText !== "done")
            throw new Error(`loop bench: ${result.turns} turns`);
          split.modelNs.push(model.spentNs);
          split.toolNs.push(toolNs);
          return total;
        },
      },
      { runs: options.runs, warmup: 1 },
    );
    // The warm-up run recorded a split too; keep the timed runs only.
    const modelNs = split.modelNs.slice(-options.runs);
    const tools = split.toolNs.slice(-options.runs);
    const perTurn = (values: readonly number[]): number[] => values.map((value) => value / TURNS);
    const overhead = perTurn(samples.run.map((total, index) => total - (modelNs[index] as number)));
    const overheadMedian = summarize(overhead).median;
    return {
      rows: [
        {
          name: `loop: turns per second (${TURNS} turns, loopback)`,
          kind: "rate",
          value: summarize(samples.run.map((total) => (TURNS * 1e9) / total)),
        },
        { name: "loop: wall time per turn", kind: "time", value: summarize(perTurn(samples.run)) },
        { name: "loop: inside model.complete per turn (SDK + HTTP)", kind: "time", value: summarize(perTurn(modelNs)) },
        {
          name: "loop: own overhead per turn (total − complete)",
          kind: "time",
          value: summarize(overhead),
          goal: { text: "< 1 ms", met: overheadMedian < 1e6 },
        },
        { name: "loop: of which the glob call (prepare, decide, run)", kind: "time", value: summarize(perTurn(tools)) },
        {
          name: "loop: overhead without the glob call",
          kind: "time",
          value: summarize(overhead.map((value, index) => value - (tools[index] as number) / TURNS)),
        },
      ],
      notes: [
        "loop: the loopback server runs in its own process (scripts/bench/loopback-child.ts), so only the agent's side is timed.",
      ],
    };
  } finally {
    await server.close();
    removeTemp(workspace);
  }
}

/** Starts loopback-child.ts and waits for the base URL it prints; closing its stdin ends it. */
async function startServer(): Promise<{ baseURL: string; close(): Promise<void> }> {
  const child = spawn(process.execPath, ["--import", "tsx", SERVER, String(TURNS)], {
    cwd: REPO,
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const baseURL = await new Promise<string>((resolve, reject) => {
    let text = "";
    child.stdout.on("data", (chunk: Buffer) => {
      text += chunk.toString("utf8");
      if (text.includes("\n")) resolve(text.trim());
    });
    child.once("error", reject);
    child.once("exit", (code) => reject(new Error(`loopback server exited early with ${code}`)));
  });
  return {
    baseURL,
    close: () => {
      child.stdin.end();
      return exited;
    },
  };
}
