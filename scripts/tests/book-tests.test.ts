import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { BOOK_TESTS, bookTests } from "../book-tests.js";
import { chapterNames } from "../test-plan/plan.js";

const repository = fileURLToPath(new URL("../../", import.meta.url));
const chapters = chapterNames(join(repository, "code", "chapters"));
const { scripts } = JSON.parse(readFileSync(join(repository, "package.json"), "utf8")) as {
  scripts: Record<string, string>;
};

describe("the book's own test run, npm run test:chNN:book", () => {
  it("every chapter has a book list and a script without `--`, npm run test:chNN:book", () => {
    expect(Object.keys(BOOK_TESTS).sort()).toEqual(chapters);
    for (const chapter of chapters) {
      expect(scripts[`test:${chapter}:book`]).toBe(`tsx scripts/book-tests.ts ${chapter}`);
    }
  });

  it("every file the book names for a chapter exists in that chapter's snapshot and every later one", () => {
    const missing = chapters.flatMap((chapter) =>
      bookTests(chapter)
        .filter((file) => !existsSync(join(repository, "code", "chapters", chapter, file)))
        .map((file) => `${chapter}/${file}`),
    );
    expect(missing).toEqual([]);
  });

  it("a chapter's book run holds its own files after every earlier chapter's, each once", () => {
    expect(bookTests("ch01")).toHaveLength(6);
    expect(bookTests("ch05")).toHaveLength(14);
    expect(bookTests("ch05").slice(-2)).toEqual(["tests/todos.test.ts", "tests/ch05-todos.test.ts"]);
    for (const chapter of chapters) expect(new Set(bookTests(chapter)).size).toBe(bookTests(chapter).length);
    expect(() => bookTests("ch99")).toThrow("no book test list for ch99");
  });
});
