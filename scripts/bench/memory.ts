// memory: chapter 9's cost on a turn that needs no model for it. One run of one model call through the loop with a
// MemorySession over an empty workspace and over a store of 10 records (no selector, so the keyword path chooses,
// and no extractor), side by side with the same run without a lifecycle, as P08 makes it. What is left is the
// locked read of the store (manifest and every record, validated), the selection and the injected message.
import { z } from "zod";
import { AgentRunner, type TurnLifecycle } from "../../code/chapters/ch09/src/core/loop.js";
import { assistantMessage } from "../../code/chapters/ch09/src/core/messages.js";
import type { ModelClient } from "../../code/chapters/ch09/src/core/model.js";
import { ToolRegistry, toolSuccess } from "../../code/chapters/ch09/src/core/tools.js";
import { MemoryRecord, MemorySession, MemoryStore, MemoryType } from "../../code/chapters/ch09/src/features/memory.js";
import { nowNs, ratioOfMedians, rounds, summarize } from "./stats.js";
import { ratioText, type Row } from "./table.js";
import { makeTemp, removeTemp } from "./temp.js";

const PROMPT = "这个项目的命令示例有什么约束？";

/** Answers every request at once with the same text: the model costs nothing here. */
const instant: ModelClient = {
  complete: () => Promise.resolve({ message: assistantMessage("done"), finishReason: "stop" }),
};

function tools(): ToolRegistry {
  const registry = new ToolRegistry();
  registry.register({
    name: "noop",
    description: "does nothing",
    inputSchema: z.strictObject({}),
    effect: "read",
    handler: () => Promise.resolve(toolSuccess("")),
  });
  return registry;
}

function runner(workspace: string, turnLifecycle?: TurnLifecycle): AgentRunner {
  return new AgentRunner({ model: instant, tools: tools(), systemPrompt: "bench", workspace, turnLifecycle });
}

/** Ten records of the size a real store holds: a one-line description and a few hundred bytes of body. */
function tenRecords(): MemoryRecord[] {
  return Array.from(
    { length: 10 },
    (_, index) =>
      new MemoryRecord({
        name: `bench-memory-${index}`,
        description: index === 3 ? "本项目的命令示例只使用 PowerShell" : `Bench memory number ${index}`,
        kind: MemoryType.PROJECT,
        body: `Line of the memory body, repeated to a realistic size (${index}).\n`.repeat(6),
      }),
  );
}

export async function benchMemory(options: { readonly runs: number }): Promise<{ rows: Row[]; notes: string[] }> {
  const empty = makeTemp("memory-empty");
  const stocked = makeTemp("memory-ten");
  try {
    await new MemoryStore({ workspace: stocked }).extend(tenRecords());
    let injected = 0;
    const once = (workspace: string | undefined) => async (): Promise<number> => {
      const folder = workspace ?? empty;
      const session =
        workspace === undefined ? undefined : new MemorySession({ store: new MemoryStore({ workspace }) });
      const agent = runner(folder, session);
      const start = nowNs();
      await agent.run(PROMPT);
      const elapsed = nowNs() - start;
      if (workspace === stocked && session !== undefined) injected = session.selected.length;
      return elapsed;
    };
    const samples = await rounds(
      { plain: once(undefined), empty: once(empty), ten: once(stocked) },
      { runs: options.runs, warmup: 3 },
    );
    const rows: Row[] = [
      {
        name: "memory: one-call run, P09's session over an empty workspace (no store)",
        kind: "time",
        value: summarize(samples.empty),
        ratio: ratioText(ratioOfMedians(samples.empty, samples.plain), "P08"),
      },
      {
        name: "memory: the same run over a store of 10 records (keyword selection, no model)",
        kind: "time",
        value: summarize(samples.ten),
        ratio: ratioText(ratioOfMedians(samples.ten, samples.plain), "P08"),
      },
      { name: "memory: the same run without a lifecycle (P08's loop)", kind: "time", value: summarize(samples.plain) },
    ];
    const notes = [
      `memory: over 10 records the keyword path selected ${injected} for the prompt ${JSON.stringify(PROMPT)}; ` +
        "each run takes the store's lock (proper-lockfile's mkdir and rmdir of .memory/.lock) and reads the " +
        "manifest and every listed record. A real P09 run also pays the selector and extractor model calls, which " +
        "dwarf this.",
    ];
    return { rows, notes };
  } finally {
    removeTemp(empty);
    removeTemp(stocked);
  }
}
