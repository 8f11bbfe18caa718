import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// One project per chapter snapshot, so `vitest run --project ch03` runs one chapter's gate.
// Roots must be absolute: a relative root would resolve against the workspace folder under `npm -w`.
const chaptersRoot = fileURLToPath(new URL("./code/chapters/", import.meta.url));
const chapters = readdirSync(chaptersRoot, { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && /^ch\d\d$/.test(entry.name))
  .map((entry) => entry.name)
  .sort();

export default defineConfig({
  test: {
    // In CI a JSON report as well, from which .ci/run prints the closing "N passed, N failed" line.
    reporters:
      process.env.CI === "true" ? ["default", ["json", { outputFile: ".ci/vitest-report.json" }]] : ["default"],
    projects: [
      ...chapters.map((name) => ({
        test: {
          name,
          root: `${chaptersRoot}${name}`,
          include: ["tests/**/*.test.ts"],
          testTimeout: 30_000,
          hookTimeout: 30_000,
        },
      })),
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
