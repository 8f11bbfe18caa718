import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { testPlan } from "./scripts/test-plan/plan.js";

// One project per chapter snapshot, so `vitest run --project ch03` runs one chapter's gate.
// Roots must be absolute: a relative root would resolve against the workspace folder under `npm -w`.
const chaptersRoot = fileURLToPath(new URL("./code/chapters/", import.meta.url));
const plan = testPlan(chaptersRoot);
// `npm test` (scripts/test-plan/run.ts) sets this: each chapter then runs only the test files whose inputs
// differ from every run made earlier in the same invocation; `npm run test:chNN` runs a whole chapter.
const onlyPlannedRuns = process.env.AGENT_TEST_PLAN === "reuse";
const traceSetup = fileURLToPath(new URL("./scripts/test-plan/trace-setup.ts", import.meta.url));

export default defineConfig({
  test: {
    // Most test time is spent waiting on processes (PowerShell, the CLI, a pseudo-terminal), not on this CPU:
    // one worker more than the cores keeps them busy (vitest's default is one fewer, so a single one on two).
    maxWorkers: availableParallelism() + 1,
    projects: [
      ...[...plan.inputs].flatMap(([name, tests]) => {
        const include = onlyPlannedRuns
          ? plan.entries.filter((entry) => entry.chapter === name && entry.action === "run").map((entry) => entry.file)
          : ["tests/**/*.test.ts"];
        if (include.length === 0) return [];
        return [
          {
            test: {
              name,
              root: `${chaptersRoot}${name}`,
              include,
              setupFiles: [traceSetup],
              provide: { testInputs: { chapter: name, tests: Object.fromEntries(tests) } },
              testTimeout: 30_000,
              hookTimeout: 30_000,
            },
          },
        ];
      }),
      {
        test: {
          name: "scripts",
          root: fileURLToPath(new URL("./scripts/", import.meta.url)),
          include: ["tests/**/*.test.ts"],
          testTimeout: 60_000,
        },
      },
    ],
  },
});
