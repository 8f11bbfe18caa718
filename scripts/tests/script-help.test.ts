import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// Issue 35 item 4: a reader who asks a long-running script for --help gets its usage at once, exit 0, and one who
// mistypes an option gets the usage and exit 2; never a stack trace, and never the run itself.

const script = (path: string): string => fileURLToPath(new URL(`../${path}`, import.meta.url));
const tsx = import.meta.resolve("tsx");

function run(path: string, args: readonly string[]) {
  const started = Date.now();
  const result = spawnSync(process.execPath, ["--import", tsx, script(path), ...args], {
    encoding: "utf8",
    timeout: 30_000,
  });
  return { ...result, ms: Date.now() - started };
}

describe("--help of the scripts that run for minutes", () => {
  it.each([
    ["verify-experiments.ts", "Usage: npm run verify:experiments"],
    ["bench/index.ts", "Usage: npm run bench"],
    ["test-plan/main.ts", "Usage: npm run test:plan"],
  ])("%s --help prints its usage and exits 0 at once", (path, usage) => {
    const result = run(path, ["--help"]);
    expect(result.status).toBe(0);
    expect(result.stdout.startsWith(usage)).toBe(true);
    expect(result.stderr).toBe("");
    expect(result.ms).toBeLessThan(15_000);
  });

  it.each(["verify-experiments.ts", "bench/index.ts", "test-plan/main.ts"])(
    "%s with an unknown option prints the usage and exits 2, without a stack trace",
    (path) => {
      const result = run(path, ["--no-such-option"]);
      expect(result.status).toBe(2);
      expect(result.stderr).toContain("Usage: npm run ");
      expect(result.stderr).not.toMatch(/^\s+at /m);
    },
  );
});
