// Policy overhead: PermissionPolicy.decide() per call, as chapter 3 builds it, next to a bare handler call.
import { mkdirSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { NodeWorkspaceFileSystem } from "../../code/chapters/ch03/src/adapters/filesystem.js";
import type { CommandRunner } from "../../code/chapters/ch03/src/core/commands.js";
import {
  PermissionDecision,
  PermissionPolicy,
  PermissionRequest,
  PermissionRule,
} from "../../code/chapters/ch03/src/core/permissions.js";
import { toolCall } from "../../code/chapters/ch03/src/core/messages.js";
import {
  toolSuccess,
  type ToolContext,
  type ToolRegistry,
  type ValidToolCall,
} from "../../code/chapters/ch03/src/core/tools.js";
import { createChapterTwoTools } from "../../code/chapters/ch03/src/features/builtin-tools.js";
import { nowNs, ratioOfMedians, rounds, summarize } from "./stats.js";
import { ratioText, type Row } from "./table.js";
import { makeTemp, removeTemp } from "./temp.js";

const WRITE_PATH = "sub/file.txt";
const ALLOW = new PermissionDecision("allow", "Approved instantly by the bench", "bench");

/** bootstrap.ts keeps its one chapter 3 rule to itself; this is the same rule, word for word. */
const CONFIRM_FILE_WRITE = new PermissionRule({
  name: "confirm-file-write",
  behavior: "ask",
  reason: "File writes require explicit approval from chapter 3 onward",
  matches: (request) => {
    const name = request.prepared.definition.name;
    return name === "write_file" || name === "edit_file";
  },
});

const neverRuns: CommandRunner = { run: () => Promise.reject(new Error("the policy bench runs no command")) };

export async function benchPolicy(options: { readonly runs: number; readonly batchMs: number }): Promise<Row[]> {
  const workspace = makeTemp("policy");
  try {
    mkdirSync(join(workspace, "sub"));
    writeFileSync(join(workspace, WRITE_PATH), "x");
    const absolute = join(workspace, WRITE_PATH);
    const fileSystem = new NodeWorkspaceFileSystem();
    const tools = createChapterTwoTools(neverRuns, fileSystem);
    tools.register({
      name: "noop",
      description: "Does nothing",
      inputSchema: z.strictObject({}),
      effect: "read",
      handler: () => Promise.resolve(toolSuccess("ok")),
    });
    const context: ToolContext = { workspace, identity: "user" };
    // Exactly the chapter 3 policy of bootstrap.ts, with an approver that allows at once and a silent audit.
    const policy = new PermissionPolicy({
      rules: [CONFIRM_FILE_WRITE],
      approval: { decide: () => Promise.resolve(ALLOW) },
      audit: { record: () => undefined },
      writeBoundary: fileSystem,
    });
    const request = (name: string, args: unknown): PermissionRequest =>
      new PermissionRequest({ prepared: prepare(tools, name, args), context });
    const read = request("glob", { pattern: "*.txt" });
    const shell = request("shell", { command: "Write-Output 1" });
    const write = request("write_file", { path: WRITE_PATH, content: "y" });
    const noop = prepare(tools, "noop", {});

    // Check the scenario before timing it: a bench of the wrong path would be worse than none.
    const behaviours = await Promise.all([read, shell, write].map(async (r) => (await policy.decide(r)).behavior));
    if (behaviours.join() !== "allow,allow,allow") throw new Error(`policy bench: unexpected ${behaviours.join()}`);

    const samples = await rounds(
      {
        invoke: perOp(() => tools.invoke(noop, context), options.batchMs),
        read: perOp(() => policy.decide(read), options.batchMs),
        shell: perOp(() => policy.decide(shell), options.batchMs),
        write: perOp(() => policy.decide(write), options.batchMs),
        boundary: perOp(() => fileSystem.isPathWithinWorkspace(workspace, WRITE_PATH), options.batchMs),
        realpath: perOpSync(() => realpathSync(absolute), options.batchMs),
        realpathNative: perOpSync(() => realpathSync.native(absolute), options.batchMs),
      },
      { runs: options.runs, warmup: 1 },
    );
    const vsInvoke = (variant: number[]): string => ratioText(ratioOfMedians(variant, samples.invoke), "invoke");
    const writeVsRealpath = ratioOfMedians(samples.write, samples.realpath);
    const readMedian = summarize(samples.read).median;
    return [
      { name: "policy: handler via ToolRegistry.invoke (noop)", kind: "time", value: summarize(samples.invoke) },
      {
        name: "policy: decide(read: glob)",
        kind: "time",
        value: summarize(samples.read),
        ratio: vsInvoke(samples.read),
        goal: { text: "< 5 µs", met: readMedian < 5_000 },
      },
      {
        name: "policy: decide(shell, ask → allow)",
        kind: "time",
        value: summarize(samples.shell),
        ratio: vsInvoke(samples.shell),
      },
      {
        name: "policy: decide(write inside, ask → allow)",
        kind: "time",
        value: summarize(samples.write),
        ratio: `${vsInvoke(samples.write)}; ${ratioText(writeVsRealpath, "realpathSync")}`,
        goal: { text: "< 2× realpathSync", met: writeVsRealpath < 2 },
      },
      {
        name: "policy: boundary only (isPathWithinWorkspace)",
        kind: "time",
        value: summarize(samples.boundary),
        ratio: ratioText(ratioOfMedians(samples.boundary, samples.realpath), "realpathSync"),
      },
      { name: "policy: fs.realpathSync (same path)", kind: "time", value: summarize(samples.realpath) },
      {
        name: "policy: fs.realpathSync.native (same path)",
        kind: "time",
        value: summarize(samples.realpathNative),
        ratio: ratioText(ratioOfMedians(samples.realpathNative, samples.realpath), "realpathSync"),
      },
    ];
  } finally {
    removeTemp(workspace);
  }
}

function prepare(tools: ToolRegistry, name: string, args: unknown): ValidToolCall {
  const prepared = tools.prepare(toolCall(`call_${name}`, name, JSON.stringify(args)));
  if (prepared.error !== undefined) throw new Error(`policy bench: ${prepared.error.content}`);
  return prepared;
}

/** Per-call ns of an async `op`, awaited one call after another. */
function perOp(op: () => Promise<unknown>, batchMs: number): () => Promise<number> {
  return sized(async (count) => {
    const start = nowNs();
    for (let i = 0; i < count; i += 1) await op();
    return nowNs() - start;
  }, batchMs);
}

/** Per-call ns of a synchronous `op`; its results are kept so the call cannot be optimised away. */
function perOpSync(op: () => unknown, batchMs: number): () => Promise<number> {
  const results: unknown[] = [];
  return sized((count) => {
    results.length = 0;
    const start = nowNs();
    for (let i = 0; i < count; i += 1) results.push(op());
    return Promise.resolve(nowNs() - start);
  }, batchMs);
}

/** A sampler: the batch size is found once (doubling until it lasts ~`batchMs`), then each sample is ns per call. */
function sized(batch: (count: number) => Promise<number>, batchMs: number): () => Promise<number> {
  let size = 0;
  return async () => {
    if (size === 0) {
      let count = 1;
      for (;;) {
        const elapsed = await batch(count);
        if (elapsed >= batchMs * 1e6 || count >= 1 << 24) {
          size = Math.max(1, Math.round((count * batchMs * 1e6) / elapsed));
          break;
        }
        count *= 2;
      }
    }
    return (await batch(size)) / size;
  };
}
