import { spawn, spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import type { Terminal as HeadlessTerminal } from "@xterm/headless";

// The package's ES module entry is not shipped: load its CommonJS build.
const { Terminal } = createRequire(import.meta.url)("@xterm/headless") as typeof import("@xterm/headless");

/** The approval question, as the terminal approver prints it. */
const QUESTION = "允许本次调用? [y/N] ";
/** How long the output must stay quiet after a question before it counts as asked (the CLI now waits). */
const SETTLE_MS = 150;

/** util-linux `script` gives the program a real pseudo-terminal; the tests that need one skip without it. */
export const ptyAvailable =
  process.platform === "linux" && spawnSync("script", ["--version"], { encoding: "utf8" }).status === 0;

/** The 24 rows of an 80×24 screen, right-trimmed, and the row the cursor is on. */
export interface Screen {
  readonly rows: readonly string[];
  readonly cursorRow: number;
}

export interface TerminalRun {
  /** The screen each time a question was asked, before it was answered. */
  readonly questions: readonly Screen[];
  /** What the program wrote while each question waited before its answer was typed. */
  readonly whileWaiting: readonly string[];
  /** The screen once the program has exited. */
  readonly last: Screen;
  readonly code: number | null;
}

export interface TerminalOptions {
  readonly env: NodeJS.ProcessEnv;
  readonly cwd: string;
  /** Typed as soon as the program starts, before any question. */
  readonly typeAhead?: string;
  /** Typed at each question in turn (`"n\n"` when there are fewer). */
  readonly answers: readonly string[];
  /** How long each question waits, after it was asked, before its answer is typed. */
  readonly waitMs?: number;
}

/**
 * Runs `command` under a pseudo-terminal and shows everything it writes to an 80×24 terminal emulator
 * (xterm.js, headless), so a test sees the screen a person sees when the question is asked.
 */
export function runOnTerminal(command: readonly string[], options: TerminalOptions): Promise<TerminalRun> {
  const line = command.map((part) => `'${part.replace(/'/g, "'\\''")}'`).join(" ");
  const term = new Terminal({ cols: 80, rows: 24, scrollback: 5000, allowProposedApi: true });
  const questions: Screen[] = [];
  const whileWaiting: string[] = [];
  return new Promise((resolve, reject) => {
    const child = spawn("script", ["-qec", line, "/dev/null"], {
      cwd: options.cwd,
      env: options.env,
      stdio: ["pipe", "pipe", "pipe"],
    });
    let output = "";
    let settle: NodeJS.Timeout | undefined;
    const kill = setTimeout(() => child.kill("SIGKILL"), 60_000);
    const asked = async (): Promise<void> => {
      const index = questions.length;
      questions.push(await screenOf(term));
      const mark = output.length;
      await new Promise((done) => setTimeout(done, options.waitMs ?? 0));
      whileWaiting.push(output.slice(mark));
      child.stdin.write(options.answers[index] ?? "n\n");
    };
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk;
      term.write(chunk);
      clearTimeout(settle);
      if (output.endsWith(QUESTION)) settle = setTimeout(() => void asked().catch(reject), SETTLE_MS);
    });
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(kill);
      clearTimeout(settle);
      void screenOf(term).then((last) => {
        term.dispose();
        resolve({ questions, whileWaiting, last, code });
      }, reject);
    });
    if (options.typeAhead !== undefined) child.stdin.write(options.typeAhead);
  });
}

async function screenOf(term: HeadlessTerminal): Promise<Screen> {
  await new Promise<void>((done) => term.write("", done));
  const buffer = term.buffer.active;
  const rows = Array.from({ length: term.rows }, (_, index) =>
    (buffer.getLine(buffer.viewportY + index)?.translateToString(true) ?? "").trimEnd(),
  );
  return { rows, cursorRow: buffer.cursorY };
}
