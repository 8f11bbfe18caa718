import { join } from "node:path";
import { defineConfig } from "vitest/config";
import { MUTATION_TESTS } from "./stryker.config.mjs";

// Only for `npm run mutate`: the ch03 project, limited to the tests that exercise the mutated modules.
// `vitest run` never loads this file; it reads vitest.config.ts.
const ch03 = "code/chapters/ch03/";

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "ch03",
          root: join(import.meta.dirname, ch03),
          include: MUTATION_TESTS.map((file) => file.slice(ch03.length)),
          testTimeout: 30_000,
          hookTimeout: 30_000,
        },
      },
    ],
  },
});
