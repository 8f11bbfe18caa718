// todos: issue 34's D5, one model reply holding a 30 MB `todo_write` run through chapter 8's loop and TodoTracker,
// its peak RSS measured in a fresh process (the chapter's own probe, tests/support/todo-probe.ts), against the same
// process that only builds the arguments. Before the snapshot was bounded, the CJK reply peaked at about 900 MiB.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { MAX_TODO_SNAPSHOT_BYTES } from "../../code/chapters/ch08/src/features/todos.js";
import { rounds, summarize } from "./stats.js";
import { formatValue, type Row } from "./table.js";

const PROBE = fileURLToPath(new URL("../../code/chapters/ch08/tests/support/todo-probe.ts", import.meta.url));
const REPO = fileURLToPath(new URL("../../", import.meta.url));
const MEBIBYTES = 30;
/** Issue 34's bar for that reply. */
const GOAL_BYTES = 650 * 2 ** 20;

/** What todo-probe.ts prints. */
interface ProbeReport {
  readonly maxRssBytes: number;
  readonly summary: { readonly result?: string; readonly todos?: number } | null;
}

/** One fresh `node --import tsx` process: `baseline` builds the arguments only, `write` also runs the reply. */
function probe(mode: "baseline" | "write", character: string): ProbeReport {
  const run = spawnSync(process.execPath, ["--import", "tsx", PROBE, mode, String(MEBIBYTES), character], {
    cwd: REPO,
    encoding: "utf8",
    timeout: 180_000,
  });
  if (run.status !== 0) throw new Error(`todo probe ${mode} exited with ${String(run.status)}: ${run.stderr}`);
  const report = JSON.parse(run.stdout) as ProbeReport;
  // The scenario before the figure: the reply was refused as too large, and the list stayed empty.
  if (
    mode === "write" &&
    (!(report.summary?.result ?? "").startsWith("Error [todo_snapshot_limit]") || report.summary?.todos !== 0)
  ) {
    throw new Error(`todo bench: the ${MEBIBYTES} MB todo_write was not refused: ${run.stdout}`);
  }
  return report;
}

export async function benchTodos(options: { readonly runs: number }): Promise<{ rows: Row[]; notes: string[] }> {
  const shapes = [
    ["CJK", "编"],
    ["ASCII", "a"],
  ] as const;
  const rows: Row[] = [];
  let baseline: number[] = [];
  for (const [label, character] of shapes) {
    const samples = await rounds(
      {
        baseline: () => Promise.resolve(probe("baseline", character).maxRssBytes),
        write: () => Promise.resolve(probe("write", character).maxRssBytes),
      },
      { runs: options.runs, warmup: 0 },
    );
    if (label === "CJK") baseline = samples.baseline;
    const peak = summarize(samples.write);
    rows.push({
      name: `todo_write memory: one ${MEBIBYTES} MB reply (${label}), peak RSS`,
      kind: "memory",
      value: peak,
      goal: { text: `≤ ${formatValue(GOAL_BYTES, "memory")}`, met: peak.max <= GOAL_BYTES },
    });
  }
  rows.push({
    name: `todo_write memory: the same process, ${MEBIBYTES} MB of arguments built, no reply`,
    kind: "memory",
    value: summarize(baseline),
  });
  return {
    rows,
    notes: [
      `todo_write memory: one reply asking for one todo_write whose single item holds ${MEBIBYTES} MB of UTF-8 ` +
        `(CJK: 3 bytes a character, 6 as an escape; ASCII: the most characters), through chapter 8's AgentRunner and ` +
        `TodoTracker in a fresh node process each run; the reply is refused (todo_snapshot_limit, results of at most ` +
        `${MAX_TODO_SNAPSHOT_BYTES} bytes) before any of its snapshot is built. The goal holds for the largest run.`,
    ],
  };
}
