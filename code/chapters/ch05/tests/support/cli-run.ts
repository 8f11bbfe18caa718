import { PassThrough } from "node:stream";
import { runCli } from "../../src/cli.js";
import { Sink } from "./sink.js";

/** What one CLI run ended with: its exit code and everything it printed. */
export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * `runCli` in this process, as a program started with no terminal gets it: stdin ended, neither stream a TTY.
 * `argv` is what the entry passes (`run --chapter N …` for a fixed entry, which names itself as `entry`), so the
 * code, the output and the exit code are the program's, without starting one.
 */
export async function runCliWithoutTerminal(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
  entry?: string,
): Promise<CliRun> {
  const [stdout, stderr] = [new Sink(), new Sink()];
  const io = { env, cwd, stdin: new PassThrough().end(), stdinIsTTY: false, stdout, stderr, stderrIsTTY: false };
  const code = await runCli(argv, io, entry);
  return { code, stdout: stdout.text, stderr: stderr.text };
}
