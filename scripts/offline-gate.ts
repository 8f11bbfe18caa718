// The offline gate in one process: format check, then typecheck + build (one compiler pass per snapshot), then
// lint with the type information of those same programs, each step timed. `.ci/run` calls this; the steps also
// run alone as `npm run format:check`, `npm run typecheck` / `npm run build` and `npm run lint`.
import { compileProjects } from "./compile.js";
import { formatCheck } from "./format-check.js";
import { lint } from "./lint.js";

async function timed<T>(name: string, step: () => Promise<T> | T): Promise<T> {
  const started = Date.now();
  console.log(`== ${name}`);
  const result = await step();
  console.log(`== ${name}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return result;
}

const formatted = await timed("format check", formatCheck);
const { programs, failed } = await timed("typecheck + build", () => compileProjects(true));
const linted = await timed("lint", () => lint(programs));
process.exitCode = formatted && !failed && linted ? 0 : 1;
