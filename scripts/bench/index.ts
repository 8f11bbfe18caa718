// `npm run bench [-- --quick] [-- --only policy,loop,glob,shell,startup,provider,skills,compaction,memory,todos]`: SPEC §12, one table, ratios
// side by side.
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { benchBudget } from "./budget.js";
import { benchGlob } from "./glob.js";
import { benchLoop } from "./loop.js";
import { describeMachine } from "./machine.js";
import { benchPolicy } from "./policy.js";
import { benchReplyCap } from "./reply.js";
import { benchRunnerOverhead } from "./runner-overhead.js";
import { benchShell } from "./shell.js";
import { benchCompaction } from "./compaction.js";
import { benchMemory } from "./memory.js";
import { benchSkills } from "./skills.js";
import { benchStartup } from "./startup.js";
import { benchTodos } from "./todos.js";
import { renderTable, type Row } from "./table.js";
import { removeAllTemp } from "./temp.js";

const SECTIONS = [
  "policy",
  "loop",
  "glob",
  "shell",
  "startup",
  "provider",
  "skills",
  "compaction",
  "memory",
  "todos",
] as const;
type Section = (typeof SECTIONS)[number];

const USAGE = `Usage: npm run bench [-- --quick] [-- --only ${SECTIONS.join(",")}]

Measures the harness's costs (see docs/benchmarks.md) and prints one table, ratios side by side.
  --quick        fewer repetitions, for a first look
  --only a,b     only these sections
  --help         this text`;

let parsed: { values: { quick: boolean; only?: string | undefined; help: boolean } };
try {
  parsed = parseArgs({
    options: {
      quick: { type: "boolean", default: false },
      only: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
} catch (error) {
  console.error(`${(error as Error).message}\n\n${USAGE}`);
  process.exit(2);
}
const { values } = parsed;
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const quick = values.quick;
const only = new Set((values.only ?? SECTIONS.join(",")).split(",").map((name) => name.trim()));
for (const name of only) {
  if (!(SECTIONS as readonly string[]).includes(name)) {
    console.error(`unknown section "${name}"; choose from ${SECTIONS.join(", ")}`);
    process.exit(2);
  }
}

// Repetitions: cheap rows run often; pwsh start-up (seconds here) and the flood run least.
const runners: Record<Section, () => Promise<{ rows: Row[]; notes?: string[] }>> = {
  policy: async () => ({ rows: await benchPolicy({ runs: quick ? 5 : 9, batchMs: quick ? 50 : 100 }) }),
  loop: () => benchLoop({ runs: quick ? 3 : 7 }),
  glob: () => benchGlob({ runs: quick ? 3 : 5 }),
  shell: async () => {
    const overhead = await benchRunnerOverhead({ runs: quick ? 10 : 30 });
    const shell = await benchShell({ runs: quick ? 3 : 5, floodRuns: quick ? 2 : 3, floodMiB: quick ? 64 : 1024 });
    return { rows: [...overhead, ...shell.rows], notes: shell.notes };
  },
  startup: () => benchStartup({ runs: quick ? 3 : 5 }),
  // Chapter 4's two provider bounds: the reply-size cap (boundedFetch) and the run-wide conversation budget.
  provider: async () => {
    const reply = await benchReplyCap({
      smallRuns: quick ? 5 : 15,
      smallBatch: quick ? 50 : 200,
      largeRuns: quick ? 5 : 15,
    });
    const budget = await benchBudget({ turns: [50, 200], runs: quick ? 3 : 7 });
    return { rows: [...reply.rows, ...budget.rows], notes: [...reply.notes, ...budget.notes] };
  },
  // Chapter 7: scanning the most Skill folders the registry accepts, against a plain read of the same tree.
  skills: () => benchSkills({ runs: quick ? 5 : 15 }),
  // Chapter 8: the tool result processor per reply, and a long run's request history with and without prepare().
  compaction: () => benchCompaction({ runs: quick ? 5 : 15, longRuns: quick ? 3 : 7 }),
  // Chapter 9: a run's memory overhead (locked store read, keyword selection, injection) against P08's loop.
  memory: () => benchMemory({ runs: quick ? 5 : 15 }),
  // Chapter 5's todo_write: the peak RSS of one 30 MB reply, each run in a fresh process (issue 34, D5).
  todos: () => benchTodos({ runs: quick ? 1 : 3 }),
};

const machine = describeMachine();
const rows: Row[] = [];
const notes: string[] = [];
const started = Date.now();
try {
  for (const section of SECTIONS) {
    if (!only.has(section)) continue;
    const sectionStart = Date.now();
    console.error(`bench: ${section} …`);
    const result = await runners[section]();
    rows.push(...result.rows);
    notes.push(...(result.notes ?? []));
    console.error(`bench: ${section} took ${((Date.now() - sectionStart) / 1e3).toFixed(1)} s`);
  }
} finally {
  removeAllTemp();
}

console.log(machine.join("\n"));
console.log(
  `load average at end: ${loadavg()
    .map((value) => value.toFixed(2))
    .join(" ")}; bench took ${((Date.now() - started) / 1e3).toFixed(0)} s${quick ? " (--quick)" : ""}`,
);
console.log("");
console.log(renderTable(rows));
if (notes.length > 0) console.log(`\n${notes.map((note) => `- ${note}`).join("\n")}`);
