// Unified diff of two chapter snapshots: `npm run diff -- ch02 ch03`, or only some parts of them,
// `npm run diff -- ch02 ch03 src demo`. Parts come out in reading order: the package files, src/, demo/, then
// tests/; the data under tests/fixtures/ only with --fixtures. Colour on a terminal, or with FORCE_COLOR=1 for
// `| less -R`; never with NO_COLOR or into a pipe or file, so a redirect is a clean patch.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Writable } from "node:stream";
import { fileURLToPath } from "node:url";

/** What a reader can ask for, in the order the diff shows them. */
export const PARTS = {
  package: ["package.json", "tsconfig.json", "tsconfig.build.json"],
  src: ["src"],
  demo: ["demo"],
  tests: ["tests"],
} as const;

export type Part = keyof typeof PARTS;

export interface DiffRequest {
  readonly from: string;
  readonly to: string;
  /** In the order of PARTS, whatever order they were given in; all of them when none was given. */
  readonly parts: readonly Part[];
  /** Whether to show tests/fixtures/ too. */
  readonly fixtures: boolean;
}

export const USAGE = `usage: npm run diff -- chNN chMM [package] [src] [demo] [tests] [--fixtures]
  for example: npm run diff -- ch02 ch03         (everything but tests/fixtures/)
               npm run diff -- ch02 ch03 src     (only src/)
               npm run diff -- ch02 ch03 tests --fixtures
  colour: on a terminal; FORCE_COLOR=1 for | less -R; NO_COLOR=1 for none`;

const ALL_PARTS = Object.keys(PARTS) as Part[];

/** The request in `args` (what follows `npm run diff --`), or why it is not one. */
export function parseDiffArgs(args: readonly string[]): DiffRequest | { readonly error: string } {
  const [from, to, ...rest] = args;
  if (from === undefined || to === undefined || !/^ch\d\d$/.test(from) || !/^ch\d\d$/.test(to)) {
    return { error: "the first two arguments must be snapshots, chNN chMM" };
  }
  const asked = new Set<Part>();
  let fixtures = false;
  for (const word of rest) {
    if (word === "--fixtures") fixtures = true;
    else if (Object.hasOwn(PARTS, word)) asked.add(word as Part);
    else return { error: `unknown part or flag: ${word}` };
  }
  const parts = asked.size === 0 ? ALL_PARTS : ALL_PARTS.filter((part) => asked.has(part));
  return { from, to, parts, fixtures };
}

/**
 * Colour as Node decides it for its own output: FORCE_COLOR wins (0 or false turns it off, any other value
 * on), then a non-empty NO_COLOR turns it off, else colour only on a terminal.
 */
export function colorWanted(env: Readonly<Record<string, string | undefined>>, isTTY: boolean): boolean {
  const force = env.FORCE_COLOR;
  if (force !== undefined) return force !== "0" && force.toLowerCase() !== "false";
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== "") return false;
  return isTTY;
}

export interface DiffOutput {
  readonly stdout: Writable;
  readonly stderr: Writable;
  readonly color: boolean;
}

/**
 * Diffs the request's parts of `chaptersDir/from` and `chaptersDir/to` with `git diff --no-index`, onto
 * `out.stdout`. Resolves to the exit code: 0 (with or without differences), 2 for a bad request or no git.
 */
export async function diffSnapshots(chaptersDir: string, request: DiffRequest, out: DiffOutput): Promise<number> {
  for (const name of [request.from, request.to]) {
    if (!existsSync(join(chaptersDir, name))) {
      out.stderr.write(`no snapshot code/chapters/${name}\n`);
      return 2;
    }
  }
  let shown = 0;
  let leftOut = 0;
  for (const path of request.parts.flatMap((part) => PARTS[part])) {
    const sections = new SectionFilter(out.stdout, request.fixtures ? () => true : (header) => !FIXTURE.test(header));
    const status = await gitDiff(chaptersDir, request, path, out.color, out.stdout, sections);
    if (typeof status === "string") {
      out.stderr.write(`git is needed for the diff: ${status}\n`);
      return 2;
    }
    if (status !== 0 && status !== 1) return status;
    shown += sections.kept;
    leftOut += sections.skipped;
  }
  const files = `${leftOut} file${leftOut === 1 ? "" : "s"}`;
  const where = request.parts.length === ALL_PARTS.length ? "" : ` in ${request.parts.join(", ")}`;
  if (shown > 0 && leftOut > 0) {
    // On stderr, so that a redirected patch stays a patch.
    out.stderr.write(`(${files} under tests/fixtures/ left out; add --fixtures to see them)\n`);
  } else if (leftOut > 0) {
    out.stdout.write(
      `${request.from} and ${request.to} differ${where} only under tests/fixtures/ (${files}); add --fixtures to see them\n`,
    );
  } else if (shown === 0) {
    out.stdout.write(`${request.from} and ${request.to} are the same${where}\n`);
  }
  return 0;
}

// The header of a file's section, `diff --git a/ch02/tests/fixtures/… b/ch03/…`, on either side.
const FIXTURE = / "?[ab]\/ch\d\d\/tests\/fixtures\//;
// eslint-disable-next-line no-control-regex -- git's colour codes are exactly what this removes
const ANSI = /\x1b\[[0-9;]*m/g;

/**
 * Passes git's output through a file section at a time: a section begins at its `diff --git` line, and
 * `keep(header)` decides whether it is written. Bytes are passed on untouched (line ends, colour, encoding).
 */
export class SectionFilter {
  /** How many file sections were written, and how many left out. */
  kept = 0;
  skipped = 0;
  #keeping = true;
  #partial: Buffer = Buffer.alloc(0);

  constructor(
    private readonly out: Writable,
    private readonly keep: (header: string) => boolean,
  ) {}

  /** Whether the output took everything without asking to wait (see Writable.write). */
  push(chunk: Buffer): boolean {
    let ready = true;
    let data = Buffer.concat([this.#partial, chunk]);
    let end = data.indexOf(0x0a);
    while (end !== -1) {
      ready = this.#line(data.subarray(0, end + 1)) && ready;
      data = data.subarray(end + 1);
      end = data.indexOf(0x0a);
    }
    this.#partial = Buffer.from(data);
    return ready;
  }

  end(): void {
    if (this.#partial.length > 0) this.#line(this.#partial);
    this.#partial = Buffer.alloc(0);
  }

  #line(line: Buffer): boolean {
    const text = line.toString("utf8").replace(ANSI, "");
    if (text.startsWith("diff --git ")) {
      this.#keeping = this.keep(text);
      if (this.#keeping) this.kept += 1;
      else this.skipped += 1;
    }
    return this.#keeping ? this.out.write(line) : true;
  }
}

/** One `git diff --no-index` run; its exit code (1 only means "they differ"), or why git did not run. */
function gitDiff(
  cwd: string,
  request: DiffRequest,
  path: string,
  color: boolean,
  out: Writable,
  sections: SectionFilter,
): Promise<number | string> {
  return new Promise((resolve) => {
    const child = spawn(
      "git",
      [
        "diff",
        "--no-index",
        "--find-renames",
        `--color=${color ? "always" : "never"}`,
        `${request.from}/${path}`,
        `${request.to}/${path}`,
      ],
      { cwd, stdio: ["ignore", "pipe", "inherit"] },
    );
    child.stdout.on("data", (chunk: Buffer) => {
      // A pager that reads slowly holds git back instead of filling our memory.
      if (sections.push(chunk)) return;
      child.stdout.pause();
      out.once("drain", () => child.stdout.resume());
    });
    child.on("error", (error) => resolve(error.message));
    child.on("close", (code) => {
      sections.end();
      resolve(code ?? 2);
    });
  });
}

async function main(): Promise<void> {
  // `… | head` or quitting less closes the pipe: that ends the output, it is not a crash.
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") throw error;
    process.exit(0);
  });
  const args = process.argv.slice(2);
  if (args.includes("--help") || args.includes("-h")) {
    console.log(USAGE);
    return;
  }
  const request = parseDiffArgs(args);
  if ("error" in request) {
    console.error(`${request.error}\n${USAGE}`);
    process.exit(2);
  }
  const chapters = fileURLToPath(new URL("../code/chapters/", import.meta.url));
  // Node types `isTTY` as always set; on a pipe it is absent.
  const color = colorWanted(process.env, (process.stdout as { isTTY?: boolean }).isTTY === true);
  process.exitCode = await diffSnapshots(chapters, request, { stdout: process.stdout, stderr: process.stderr, color });
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) await main();
