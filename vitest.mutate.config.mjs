import { join } from "node:path";
import { defineConfig } from "vitest/config";
import { MEMORY_MUTATION_TESTS, MUTATION_TESTS } from "./stryker.config.mjs";

// Only for `npm run mutate`: the ch03 and ch09 projects, limited to the tests that exercise the mutated modules.
// `vitest run` never loads this file; it reads vitest.config.ts.
const project = (name, tests) => {
  const root = `code/chapters/${name}/`;
  return {
    test: {
      name,
      root: join(import.meta.dirname, root),
      include: tests.map((file) => file.slice(root.length)),
      testTimeout: 30_000,
      hookTimeout: 30_000,
    },
  };
};

export default defineConfig({
  test: {
    projects: [project("ch03", MUTATION_TESTS), project("ch09", MEMORY_MUTATION_TESTS)],
  },
});
