// What a test file needs beyond its import closure: the snapshot files it (or the code it calls) reads at run
// time, the entries of the processes it starts, and whether its result depends on its own chapter's folder.
// The tracer (trace-setup.ts) checks each test against its declaration in every chapter that runs it: a test
// that loads or opens a snapshot file not covered here fails, naming the file. Paths are snapshot-relative.

export interface TestDeclaration {
  /** Globs of snapshot files read at run time (`*` within a name, `**` any depth); a folder listed is `dir/**`. */
  readonly reads?: readonly string[];
  /** Globs of entry files that processes started by the test run: their import closures are inputs too. */
  readonly spawns?: readonly string[];
  /** The test checks something named after its chapter folder (`ch03` …): never reuse it for another chapter. */
  readonly ownChapter?: true;
}

/** Every chapter's fixed entry and the unified one: what a test that starts "the CLI" may start. */
const ENTRIES = "src/chapters/*.ts";

export const DECLARATIONS: Readonly<Record<string, TestDeclaration>> = {
  // Runs every chapter's demo, and reads the argument parser's source.
  "tests/agent-tutorial.test.ts": { reads: ["demo/**", "src/**"], spawns: [ENTRIES] },
  "tests/approval-screen.test.ts": { spawns: [ENTRIES] },
  // Greps the sources for the book's strings.
  "tests/book-strings.test.ts": { reads: ["src/**"] },
  "tests/bounded-resources.test.ts": { spawns: ["tests/support/rss-probe.ts"] },
  // The demos read their walkthroughs, and chapter 3's copies the snapshot's sources into its workspace.
  "tests/ch04-hooks.test.ts": { reads: ["demo/**", "src/**"], spawns: [ENTRIES] },
  // Replays chapter 5's walkthrough, and starts the ch05 entry against a loopback provider and under a terminal.
  "tests/ch05-todos.test.ts": { reads: ["demo/**"], spawns: [ENTRIES] },
  // Replays chapter 6's walkthrough, and starts the ch06 entry against a loopback provider.
  "tests/ch06-subagents.test.ts": { reads: ["demo/**"], spawns: [ENTRIES] },
  // Replays chapter 7's walkthrough (its workspace gets demo/skills), and starts the ch07 entry.
  "tests/ch07-skills.test.ts": { reads: ["demo/**"], spawns: [ENTRIES] },
  // Replays chapter 8's walkthrough in this process.
  "tests/ch08-compaction.test.ts": { reads: ["demo/**"] },
  // Replays chapter 9's walkthrough (its workspace gets a seeded .memory/), and starts the ch09 entry.
  "tests/ch09-memory.test.ts": { reads: ["demo/**"], spawns: [ENTRIES] },
  "tests/cli.test.ts": { spawns: [ENTRIES] },
  "tests/demo.test.ts": { reads: ["demo/**", "src/**"], spawns: [ENTRIES] },
  "tests/hostile-corpus.test.ts": { reads: ["tests/fixtures/hostile-calls.json"] },
  "tests/hostile-paths.test.ts": { reads: ["tests/fixtures/hostile-paths.json"] },
  // Reads every source file's imports.
  "tests/layering.test.ts": { reads: ["src/**"] },
  // A second writer in its own process: the store's lock is between processes.
  "tests/memory.test.ts": { spawns: ["tests/support/memory-*.ts"] },
  // Children that hold the lock, are interrupted inside it, or write while the parent swaps folders.
  "tests/memory-hostile.test.ts": { spawns: ["tests/support/memory-*.ts", ENTRIES] },
  "tests/process-lifetime.test.ts": { spawns: ["tests/support/cli-child.ts"] },
  "tests/round4-artifact-attacks.test.ts": { spawns: ["tests/support/round4-transcript-probe.ts"] },
  "tests/shell-flood.test.ts": { spawns: ["tests/support/shell-flood-probe.ts"] },
  "tests/todos.test.ts": { spawns: ["tests/support/todo-probe.ts"] },
};

export function declarationFor(testFile: string): TestDeclaration {
  return DECLARATIONS[testFile] ?? {};
}

/** A declaration glob as a regular expression over snapshot-relative paths. */
export function globPattern(glob: string): RegExp {
  const body = glob
    .split(/(\*\*\/|\*\*|\*)/)
    .map((part) => {
      if (part === "**/") return "(?:.*/)?";
      if (part === "**") return ".*";
      if (part === "*") return "[^/]*";
      return part.replace(/[.+?^${}()|[\]\\]/g, "\\$&");
    })
    .join("");
  return new RegExp(`^${body}$`);
}

/** Whether a declared read covers `path`: the path itself, or, for a folder, everything below it. */
export function readCovers(reads: readonly string[], path: string, isFolder: boolean): boolean {
  return reads.some(
    (glob) =>
      globPattern(glob).test(path) || (isFolder && (glob === `${path}/**` || globPattern(glob).test(`${path}/`))),
  );
}
